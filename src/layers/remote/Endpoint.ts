/**
 * A remote's endpoint URL, parsed: `grpc://host:port`, `grpcs://host:port`, `http(s)://host:port[/prefix]`. Plain
 * code without Effect: the no-op check (`programs/kiln/noop.ts`) refuses what the full run would, before anything is
 * loaded, and `RemoteSettings` reports it.
 *
 * @since 0.1.0
 */

/**
 * @since 0.1.0
 * @category models
 */
export interface Endpoint {
  readonly scheme: "grpc" | "grpcs" | "http" | "https"
  readonly host: string
  readonly port: number
  /** HTTP only: the path the cache lives under, without a trailing `/` (`""` at the root). */
  readonly prefix: string
  /** How the endpoint is named in messages and logs: scheme, host, port and prefix, never credentials. */
  readonly display: string
}

/**
 * What is wrong with an endpoint URL, in one line.
 *
 * @since 0.1.0
 * @category models
 */
export interface Problem {
  readonly problem: string
}

/**
 * The endpoint `url` names, or what is wrong with it.
 *
 * @since 0.1.0
 * @category parsing
 */
export const parse = (url: string): Endpoint | Problem => {
  let u: URL
  try {
    u = new URL(url)
  } catch {
    return {
      problem: `\`${url}\` is not a URL: expected grpc://host:port, grpcs://host:port or http(s)://host:port[/prefix]`
    }
  }
  const scheme = u.protocol.replace(/:$/, "")
  if (scheme !== "grpc" && scheme !== "grpcs" && scheme !== "http" && scheme !== "https") {
    return { problem: `unsupported scheme \`${scheme}:\` in \`${url}\`: use grpc, grpcs, http or https` }
  }
  if (u.username !== "" || u.password !== "") {
    return { problem: "credentials in the URL would be logged: pass them with --remote-header NAME=$VAR" }
  }
  if (u.hostname === "") return { problem: `\`${url}\` names no host` }
  const port = u.port !== "" ? Number(u.port) : scheme === "https" || scheme === "grpcs" ? 443 : 80
  const isGrpc = scheme === "grpc" || scheme === "grpcs"
  if (isGrpc && u.pathname !== "/" && u.pathname !== "") {
    return {
      problem: `a gRPC endpoint has no path (\`${u.pathname}\`): name the instance with --remote-instance-name`
    }
  }
  if (u.search !== "" || u.hash !== "") return { problem: `\`${url}\` must not have a query or fragment` }
  const prefix = isGrpc ? "" : u.pathname.replace(/\/+$/, "")
  const host = u.hostname.replace(/^\[|\]$/g, "")
  return { scheme, host, port, prefix, display: `${scheme}://${u.host}${prefix}` }
}

/**
 * @since 0.1.0
 * @category guards
 */
export const isProblem = (parsed: Endpoint | Problem): parsed is Problem => "problem" in parsed
