// Where the sandbox is: its root is two levels above this file (<root>/static/js/base.js),
// whatever the prefix in front of it. A JupyterHub tile serves the sandbox under
// /user/<name>/glassllm/, a course proxy under its own path: so the page never writes an
// absolute URL; every address it makes comes from here.

/** The sandbox's root URL, ending in "/". */
export const ROOT = new URL("../../", import.meta.url);

/** The full URL of one of the sandbox's paths ("api/v1/ops"); a leading "/" still means
 *  the sandbox's root, never the host's. */
export function appURL(path) {
  return new URL(String(path).replace(/^\/+/, ""), ROOT).href;
}
