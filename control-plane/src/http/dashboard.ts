import express, { type Router } from "express";
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * The dashboard (dashboard/ workspace, built by `npx turbo run build`) at `/`. It loads
 * nothing from another host, and the Content-Security-Policy says so to the browser too: a
 * script, style, image or connection to anywhere but this origin is blocked.
 */
export const DASHBOARD_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
  "base-uri 'none'",
  "form-action 'self'",
].join("; ");

function distDir(): string | null {
  try {
    const require = createRequire(import.meta.url);
    const dir = join(dirname(require.resolve("@capstan/dashboard/package.json")), "dist");
    return existsSync(join(dir, "index.html")) ? dir : null;
  } catch {
    return null;
  }
}

const NOT_BUILT = `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Capstan</title></head>
<body><p>The dashboard is not built: run <code>npx turbo run build</code> (or <code>npm run build</code>) and restart.</p>
<p>The API is at <a href="/docs">/docs</a>.</p></body></html>
`;

export function dashboardRouter(): Router {
  const r = express.Router();
  const dir = distDir();
  const index = dir ? readFileSync(join(dir, "index.html")) : null;
  r.use((_req, res, next) => {
    res.setHeader("Content-Security-Policy", DASHBOARD_CSP);
    res.setHeader("X-Content-Type-Options", "nosniff");
    res.setHeader("Referrer-Policy", "no-referrer");
    next();
  });
  r.get("/", (_req, res) => {
    res.setHeader("Cache-Control", "no-cache");
    if (!index) return void res.status(503).type("html").send(NOT_BUILT);
    res.type("html").send(index);
  });
  // File names carry a content hash (Vite): cached for good.
  if (dir) r.use("/assets", express.static(join(dir, "assets"), { index: false, immutable: true, maxAge: "365d", fallthrough: true }));
  return r;
}
