import { defineConfig } from "vite";

/**
 * The dashboard is plain static files in dist/ (the control plane serves them at /). Nothing
 * loads from another host: no CDN, no web fonts, no analytics (the CSP in
 * control-plane/src/http/dashboard.ts enforces it in the browser).
 */
export default defineConfig({
  base: "/",
  build: { outDir: "dist", emptyOutDir: true, sourcemap: false, target: "es2022", modulePreload: { polyfill: false } },
});
