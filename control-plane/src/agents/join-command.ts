/**
 * The one-line command that starts an agent container on a host. Values are quoted for a
 * POSIX shell; the URL and image are validated at start-up and the token is hex, so the
 * quoting is belt and braces.
 */
const q = (v: string) => `'${v.replace(/'/g, `'\\''`)}'`;

export function joinCommand(publicUrl: string, image: string, agentToken: string): string {
  return [
    "docker run -d --name capstan-agent --restart unless-stopped",
    "-v /var/run/docker.sock:/var/run/docker.sock -v capstan-agent-state:/var/lib/capstan-agent",
    `-e CAPSTAN_URL=${q(publicUrl)} -e CAPSTAN_AGENT_TOKEN=${q(agentToken)}`,
    q(image),
  ].join(" ");
}
