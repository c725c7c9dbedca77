/**
 * DNS-rebinding and cross-site guards: which Host and Origin headers the
 * listener answers to. A browser page elsewhere cannot name our Host, and a
 * foreign page's Origin never equals the approved proxy's origin.
 */

export interface HostAllowlist {
  hostAllowed(host: string | undefined): boolean;
  originAllowed(origin: string | undefined): boolean;
}

/**
 * Hosts: the loopback listener by IP or name with its bound port, and the
 * `publicUrl` host (as the proxy forwards it). Origin: absent, or exactly the
 * `publicUrl` origin; without `publicUrl` no Origin is accepted at all.
 */
export function hostAllowlist(port: number, publicUrl: string | undefined): HostAllowlist {
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  let origin: string | undefined;
  if (publicUrl !== undefined) {
    const url = new URL(publicUrl);
    hosts.add(url.host.toLowerCase());
    origin = url.origin.toLowerCase();
  }
  return {
    // Host names are case-insensitive; nothing else is normalized.
    hostAllowed: (host) => host !== undefined && hosts.has(host.toLowerCase()),
    originAllowed: (value) => value === undefined || (origin !== undefined && value.toLowerCase() === origin),
  };
}
