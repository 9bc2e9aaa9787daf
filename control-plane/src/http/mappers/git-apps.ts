import type { GitApp } from "@capstan/shared";
import type { Out } from "./types.js";
import { iso } from "../dto.js";

export type GitAppRecord = {
  uuid: string;
  name: string;
  /** GitHub's ids are 64-bit; the API schema keeps them within Number.MAX_SAFE_INTEGER. */
  appId: bigint;
  installationId: bigint;
  apiUrl: string;
  htmlUrl: string;
  webhookSecret: string | null;
  createdAt: Date;
  updatedAt: Date;
};

/** The private key and the webhook secret are never mapped: they exist in no response. */
export const gitAppDto = (g: GitAppRecord): Out<typeof GitApp> => ({
  uuid: g.uuid,
  name: g.name,
  app_id: Number(g.appId),
  installation_id: Number(g.installationId),
  api_url: g.apiUrl,
  html_url: g.htmlUrl,
  has_webhook_secret: g.webhookSecret !== null,
  created_at: iso(g.createdAt),
  updated_at: iso(g.updatedAt),
});
