/**
 * The one interface every DNS provider implements (issue 21): the few operations reconciling a
 * zone needs. Names are absolute, lowercase, without the trailing dot ("*.apps.example.com").
 * TXT content is the text itself, unquoted: each provider quotes it the way its API wants.
 */

/** The record types Capstan reads and writes (routing records and their ownership markers). */
export const MANAGED_RECORD_TYPES = ["A", "AAAA", "CNAME", "TXT"] as const;
export type ManagedRecordType = (typeof MANAGED_RECORD_TYPES)[number];

export interface RecordData {
  name: string;
  type: ManagedRecordType;
  content: string;
  ttl: number;
}

/** A record as the provider holds it. `id` is the provider's record id, or (PowerDNS, RFC 2136: no ids) name|type|content. */
export interface DnsRecord extends RecordData {
  id: string;
}

export type ProviderTestResult = { ok: true } | { ok: false; error: string };

export interface DnsProvider {
  /** The records of these types in the zone (others, like SOA and NS, are left out). */
  listRecords(zone: string): Promise<DnsRecord[]>;
  createRecord(zone: string, record: RecordData): Promise<void>;
  /** Replaces one record (found by its id from listRecords) with another at the same name and type. */
  updateRecord(zone: string, existing: DnsRecord, record: RecordData): Promise<void>;
  deleteRecord(zone: string, existing: DnsRecord): Promise<void>;
  /** Checks the credentials against the provider: never throws, says why when they do not work. */
  testCredentials(): Promise<ProviderTestResult>;
}

/** A provider's refusal or an unreachable provider, with a short reason safe to show (never a secret). */
export class DnsProviderError extends Error {
  override name = "DnsProviderError";
}

/** Normalises a DNS name: lowercase, no trailing dot. */
export function bareName(name: string): string {
  return name.toLowerCase().replace(/\.+$/, "");
}

export function isManagedType(t: string): t is ManagedRecordType {
  return (MANAGED_RECORD_TYPES as readonly string[]).includes(t);
}

/** Presentation-format TXT content ("a" "b") to its text: the strings joined, escapes undone. */
export function unquoteTxt(presented: string): string {
  const parts = [...presented.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => m[1]!.replace(/\\(.)/g, "$1"));
  return parts.length ? parts.join("") : presented;
}

/** Text to presentation-format TXT content: one quoted string (our markers are short, printable ASCII). */
export function quoteTxt(text: string): string {
  return `"${text.replace(/["\\]/g, (c) => `\\${c}`)}"`;
}

/** Timeout of one provider call. */
export const PROVIDER_TIMEOUT_MS = 15_000;
