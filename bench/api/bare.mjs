// Child process of bench/api/run.mjs: the baseline. A bare express app that answers GET with
// the same JSON bodies the control plane returned (res.json, as our handlers do), and nothing
// else: no auth, no rate limit, no logging, no database.
import express from "express";

process.once("message", (msg) => {
  if (msg.type !== "bodies") return;
  const bodies = new Map(Object.entries(msg.bodies));
  const app = express();
  app.disable("x-powered-by");
  app.get(/.*/, (req, res) => {
    const body = bodies.get(req.originalUrl);
    if (body === undefined) return res.status(404).json({ message: "Not found." });
    res.json(body);
  });
  const server = app.listen(0, "127.0.0.1", () => {
    server.keepAliveTimeout = 65_000;
    process.send({ type: "ready", url: `http://127.0.0.1:${server.address().port}` });
  });
  const cpuStart = process.cpuUsage();
  let wallStart = performance.now();
  process.on("message", (m) => {
    if (m.type === "cpu-reset") {
      Object.assign(cpuStart, process.cpuUsage());
      wallStart = performance.now();
    } else if (m.type === "cpu-read") {
      const used = process.cpuUsage(cpuStart);
      process.send({ type: "cpu", share: (used.user + used.system) / 1000 / (performance.now() - wallStart) });
    } else if (m.type === "stop") {
      server.closeAllConnections();
      server.close(() => process.exit(0));
    }
  });
});
