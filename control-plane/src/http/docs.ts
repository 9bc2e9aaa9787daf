import express, { type Router } from "express";
import { createRequire } from "node:module";
import { dirname } from "node:path";

const require = createRequire(import.meta.url);
const assets = dirname(require.resolve("swagger-ui-dist/package.json"));

const page = `<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>Capstan API reference</title>
  <link rel="stylesheet" href="/docs/assets/swagger-ui.css">
</head>
<body>
  <div id="reference"></div>
  <script src="/docs/assets/swagger-ui-bundle.js"></script>
  <script src="/docs/init.js"></script>
</body>
</html>
`;

const init = `window.ui = SwaggerUIBundle({ url: "/api/v1/openapi.json", dom_id: "#reference", deepLinking: true });\n`;

/** A browsable reference of /api/v1/openapi.json, served from the local swagger-ui-dist files. */
export function docsRouter(): Router {
  const r = express.Router();
  r.get("/", (_req, res) => {
    res.type("html").send(page);
  });
  r.get("/init.js", (_req, res) => {
    res.type("application/javascript").send(init);
  });
  r.use("/assets", express.static(assets, { index: false, maxAge: "1h" }));
  return r;
}
