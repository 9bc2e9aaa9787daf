import type { Config } from "./config.js";
import { openDatabase, type Database } from "./db/client.js";
import { migrate } from "./db/migrate.js";
import { resolveInstanceKey, verifyInstanceKey } from "./crypto/instance-key.js";
import { SecretBox } from "./crypto/secret-box.js";
import { AdminService } from "./services/admin.js";

// Apart from instance.ts so that the CLI's administrative commands load the database and the
// admin service only, not the HTTP app, the gateway and every service (a CLI start was 2.6 s).

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
    return { database, box, admin: new AdminService(database.prisma, box, config.defaultTeamFeatures), migrationsApplied };
  } catch (err) {
    await database.close();
    throw err;
  }
}
