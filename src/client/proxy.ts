/**
 * Which HTTP proxy, if any, requests to the service go through: the `proxy` option, else the
 * environment, worked out once per connection (so both delivery threads use the same one).
 *
 * The environment is read as undici's `EnvHttpProxyAgent` and most tools read it: an `https`
 * service uses `https_proxy`/`HTTPS_PROXY`, else the http proxy; an `http` service uses
 * `http_proxy`/`HTTP_PROXY`; `no_proxy`/`NO_PROXY` lists hosts reached directly (a host and its
 * subdomains, `.host` and `*.host` alike, with an optional `:port`; an IP range as `10.0.0.0/8`;
 * `*` for every host). A value without a scheme (`proxy.corp:3128`) is taken as `http://`, as
 * curl takes it.
 *
 * Loopback hosts (`localhost`, 127.0.0.0/8, `::1`) are always reached directly when the proxy
 * comes from the environment: the embedded local server is the default service, and a
 * machine-wide proxy cannot reach this machine's loopback. The `proxy` option applies to every host.
 */
import { BlockList, isIP } from 'node:net';
import { InvalidOptionError, ReceivedDescription } from '../errors.js';

type Env = Readonly<Record<string, string | undefined>>;

const PROXY_EXPECTED = 'an http(s) proxy URL (http://host:port, credentials allowed), or false';

/**
 * The proxy URL for `target`, or undefined for a direct connection.
 *
 * @example
 * resolveProxy(new URL('https://trace.wandb.ai'), undefined, { HTTPS_PROXY: 'proxy.corp:3128' }); // 'http://proxy.corp:3128/'
 * resolveProxy(new URL('http://127.0.0.1:6345'), undefined, { HTTP_PROXY: 'http://proxy:3128' }); // undefined
 */
export function resolveProxy(target: URL, option: string | false | undefined, env: Env): string | undefined {
  if (option === false) return undefined;
  if (option !== undefined) {
    if (typeof option !== 'string') throw new InvalidOptionError('proxy', PROXY_EXPECTED, option);
    return proxyUrl(option, 'proxy');
  }
  const fromEnv = proxyVariable(target, env);
  if (fromEnv === undefined) return undefined;
  const host = hostnameOf(target);
  const noProxy = firstSet(env, ['no_proxy', 'NO_PROXY'])?.value ?? '';
  if (isLoopback(host) || bypassedByNoProxy(host, portOf(target), noProxy)) return undefined;
  return proxyUrl(fromEnv.value, fromEnv.name);
}

/**
 * A proxy URL (or text meant as one) fit for messages: whatever comes before its last `@`, user
 * name included (a lone user name is often a token), is masked; a password may hold `/` or `@`.
 */
export function displayedProxy(proxy: string): string {
  return proxy.replace(/^([a-z][a-z0-9+.-]*:\/\/)?.*@/is, (_match, scheme: string | undefined) => `${scheme ?? ''}***@`);
}

function proxyVariable(target: URL, env: Env): { name: string; value: string } | undefined {
  const http = firstSet(env, ['http_proxy', 'HTTP_PROXY']);
  if (target.protocol === 'https:') return firstSet(env, ['https_proxy', 'HTTPS_PROXY']) ?? http;
  return http;
}

function firstSet(env: Env, names: readonly string[]): { name: string; value: string } | undefined {
  for (const name of names) {
    const value = env[name];
    if (value !== undefined && value.trim() !== '') return { name, value: value.trim() };
  }
  return undefined;
}

/** `text` as a proxy URL (`http://` when it names no scheme); `source` names where it came from. */
function proxyUrl(text: string, source: string): string {
  const withScheme = /^[a-z][a-z0-9+.-]*:\/\//i.test(text) ? text : `http://${text}`;
  let url: URL;
  try {
    url = new URL(withScheme);
  } catch {
    throw invalidProxy(text, source);
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.hostname === '') throw invalidProxy(text, source);
  // undici decodes the credentials when it connects: a stray `%` would throw there, later.
  if (!decodes(url.username) || !decodes(url.password)) throw invalidProxy(text, source, 'credentials percent-encoded where needed');
  return url.href;
}

function decodes(text: string): boolean {
  try {
    decodeURIComponent(text);
    return true;
  } catch {
    return false;
  }
}

function invalidProxy(text: string, source: string, detail?: string): InvalidOptionError {
  const received = new ReceivedDescription(JSON.stringify(displayedProxy(text).slice(0, 200)));
  const expected = [PROXY_EXPECTED, detail, source === 'proxy' ? undefined : `in ${source}`].filter((part) => part !== undefined).join(', ');
  return new InvalidOptionError('proxy', expected, received);
}

/** Lower-case host name without IPv6 brackets or a trailing dot (`wandb.ai.` is `wandb.ai`). */
function hostnameOf(url: URL): string {
  return url.hostname.toLowerCase().replace(/^\[(.*)\]$/, '$1').replace(/\.$/, '');
}

function portOf(url: URL): string {
  return url.port !== '' ? url.port : url.protocol === 'https:' ? '443' : '80';
}

const LOOPBACK_ADDRESSES = new BlockList();
LOOPBACK_ADDRESSES.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK_ADDRESSES.addAddress('::1', 'ipv6');

/** `localhost` and its subdomains, `127.0.0.0/8` (also written IPv4-mapped, `::ffff:127.0.0.1`), `::1`. */
function isLoopback(host: string): boolean {
  if (host === 'localhost' || host.endsWith('.localhost')) return true;
  const family = isIP(host);
  return family !== 0 && LOOPBACK_ADDRESSES.check(host, family === 4 ? 'ipv4' : 'ipv6');
}

/** Whether `no_proxy` sends `host:port` direct. */
export function bypassedByNoProxy(host: string, port: string, noProxy: string): boolean {
  for (const raw of noProxy.toLowerCase().split(/[,\s]+/)) {
    if (raw === '') continue;
    if (raw === '*') return true;
    if (raw.includes('/')) {
      if (inSubnet(host, raw)) return true;
      continue;
    }
    const { name, entryPort } = splitEntry(raw);
    if (entryPort !== undefined && entryPort !== port) continue;
    // An address matches the same address however it is written (`fd00::0001` is `[fd00::1]`).
    if (isIP(name) !== 0) {
      if (sameAddress(host, name)) return true;
      continue;
    }
    const domain = name.replace(/^\*?\./, '').replace(/\.$/, '');
    if (domain !== '' && (host === domain || host.endsWith(`.${domain}`))) return true;
  }
  return false;
}

/**
 * Whether `host` is an IP address inside `cidr` (`10.0.0.0/8`, `fd00::/8`), as curl and Go read
 * no_proxy. An IPv4 address written IPv4-mapped (`[::ffff:10.1.2.3]`, which a URL turns into
 * `::ffff:a01:203`) is the same address: `BlockList` matches it against IPv4 ranges, and back.
 */
function inSubnet(host: string, cidr: string): boolean {
  const [network = '', bits = ''] = cidr.split('/');
  const networkFamily = isIP(network);
  const hostFamily = isIP(host);
  if (networkFamily === 0 || hostFamily === 0 || !/^\d{1,3}$/.test(bits)) return false;
  try {
    const subnet = new BlockList();
    subnet.addSubnet(network, Number(bits), networkFamily === 4 ? 'ipv4' : 'ipv6');
    return subnet.check(host, hostFamily === 4 ? 'ipv4' : 'ipv6');
  } catch {
    return false; // a prefix out of range
  }
}

/** Whether `host` is the IP address `address` (both checked by `isIP`; IPv4-mapped IPv6 matches IPv4). */
function sameAddress(host: string, address: string): boolean {
  const hostFamily = isIP(host);
  if (hostFamily === 0) return false;
  const one = new BlockList();
  one.addAddress(address, isIP(address) === 4 ? 'ipv4' : 'ipv6');
  return one.check(host, hostFamily === 4 ? 'ipv4' : 'ipv6');
}

/** `host`, `host:port`, `[v6]`, `[v6]:port`, or a bare IPv6 address (no port). */
function splitEntry(entry: string): { name: string; entryPort: string | undefined } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(entry);
  if (bracketed !== null) return { name: bracketed[1]!, entryPort: bracketed[2] };
  const withPort = /^([^:]+):(\d+)$/.exec(entry);
  if (withPort !== null) return { name: withPort[1]!, entryPort: withPort[2] };
  return { name: entry, entryPort: undefined };
}
