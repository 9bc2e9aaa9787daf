#!/usr/bin/env node
// The `capstan-agent` command: runs the built agent (npm run build first).
import { main } from "../dist/main.js";
await main();
