/**
 * DNS-rebinding and cross-site guards: which Host and Origin headers the
 * listener answers to. A browser page elsewhere cannot name our Host, and a
 * foreign page's Origin (another site, another local port, a rebinding name)
 * never equals one of ours.
 */

export interface HostAllowlist {
  hostAllowed(host: string | undefined): boolean;
  originAllowed(origin: string | undefined): boolean;
}

/**
 * Hosts: the loopback listener by IP or name with its bound port, and the
 * `publicUrl` host (as the proxy forwards it). A Host without a port is
 * refused: it means port 80, which this listener never is.
 * Origins: absent (not a browser), this listener's own loopback origins
 * (`http://127.0.0.1:<port>`, `http://localhost:<port>`), and the `publicUrl`
 * origin. Everything else, `null` included, is refused.
 */
export function hostAllowlist(port: number, publicUrl: string | undefined): HostAllowlist {
  const hosts = new Set([`127.0.0.1:${port}`, `localhost:${port}`]);
  const origins = new Set([...hosts].map((host) => `http://${host}`));
  if (publicUrl !== undefined) {
    const url = new URL(publicUrl);
    hosts.add(url.host.toLowerCase());
    // A proxy may forward the client's Host with the default port spelled out (RFC 9110 allows both).
    if (url.port === '') hosts.add(`${url.hostname.toLowerCase()}:${url.protocol === 'https:' ? 443 : 80}`);
    origins.add(url.origin.toLowerCase());
  }
  return {
    // Host names and schemes are case-insensitive; nothing else is normalized
    // (a trailing slash or path is not an origin, so it is refused).
    hostAllowed: (host) => host !== undefined && hosts.has(host.toLowerCase()),
    originAllowed: (origin) => origin === undefined || origins.has(origin.toLowerCase()),
  };
}
