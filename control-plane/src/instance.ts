import type { Express } from "express";
import type { Logger } from "pino";
import type { Config } from "./config.js";
import { openDatabase, type Database } from "./db/client.js";
import { migrate } from "./db/migrate.js";
import { resolveInstanceKey, verifyInstanceKey } from "./crypto/instance-key.js";
import { SecretBox } from "./crypto/secret-box.js";
import { createServices, type Services } from "./services/index.js";
import { AdminService } from "./services/admin.js";
import { createRateLimiter } from "./http/rate-limit.js";
import { createApp } from "./http/app.js";

export interface InstanceData {
  database: Database;
  box: SecretBox;
  admin: AdminService;
  migrationsApplied: string[];
}

/** Database migrated, instance key checked: what both the server and the CLI need. */
export async function openInstanceData(config: Config): Promise<InstanceData> {
  const migrationsApplied = await migrate(config.database);
  const database = await openDatabase(config.database);
  try {
    const box = new SecretBox(resolveInstanceKey(config.secretKey, config.dataDir));
    await verifyInstanceKey(database.prisma, box);
    return { database, box, admin: new AdminService(database.prisma), migrationsApplied };
  } catch (err) {
    await database.close();
    throw err;
  }
}

export interface Instance extends InstanceData {
  app: Express;
  services: Services;
  close(): Promise<void>;
}

/** Everything the control plane runs, without listening: the server and the tests share it. */
export async function createInstance(config: Config, log: Logger): Promise<Instance> {
  const data = await openInstanceData(config);
  const services = createServices(data.database.prisma, data.box);
  const limiter = await createRateLimiter(config.database, config.rateLimitPerMinute);
  const app = createApp({
    services,
    log,
    rateLimit: limiter.middleware,
    maxBodyBytes: config.maxBodyBytes,
    trustProxy: config.trustProxy,
    ready: async () => {
      await data.database.prisma.$queryRawUnsafe("SELECT 1");
    },
  });
  return {
    ...data,
    app,
    services,
    async close() {
      await limiter.close();
      await data.database.close();
    },
  };
}
