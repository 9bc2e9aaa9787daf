#!/usr/bin/env node
// The `capstan` command: runs the built control plane (npm run build first).
import { main } from "../dist/cli/main.js";
await main();
