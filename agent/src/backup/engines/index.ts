import type { DatabaseEngine } from "@capstan/shared";
import { clickhouseDriver } from "./clickhouse.js";
import { mongodbDriver } from "./mongodb.js";
import { mariadbDriver, mysqlDriver } from "./mysql.js";
import { postgresDriver } from "./postgres.js";
import { redisDriver } from "./redis.js";
import type { BackupDriver } from "./types.js";

export type { BackupDriver, DbTarget } from "./types.js";

/** Each engine's dump / restore tool chain. */
export const DRIVERS: Record<DatabaseEngine, BackupDriver> = {
  postgresql: postgresDriver,
  mysql: mysqlDriver,
  mariadb: mariadbDriver,
  mongodb: mongodbDriver,
  redis: redisDriver,
  keydb: redisDriver,
  dragonfly: redisDriver,
  clickhouse: clickhouseDriver,
};
