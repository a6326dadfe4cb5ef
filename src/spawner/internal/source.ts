/**
 * The spawner: a small Node process, one per engine, that forks every process the engine runs. It is plain
 * JavaScript run with `node -e`, and loads nothing but `child_process` and `fs`, on purpose: `fork()` copies the
 * page tables of the process that calls it and write-protects its heap, so the engine (a large heap, dozens of LMDB
 * maps) paid ~2–3 ms of blocked main thread per spawn plus copy-on-write faults afterwards, where this process
 * pays ~1 ms on the other core. It never writes a file that a process could exec (it only opens the output files),
 * so forking here cannot make a sandbox's binary busy (ETXTBSY).
 *
 * Protocol, one JSON object per line. Requests on stdin: `{ id, argv, cwd, env, stdout, stderr }` (the two paths are
 * files the child's output goes to). Replies on stdout: `{ id, pid }` once it runs, `{ id, code, signal, alone }`
 * when it exits (`alone`: nothing of its process group was left then), or `{ id, error, message }` when it could not
 * start. And `{ id, remove: [path…] }`: removes each tree (a sandbox whose group is gone, its log files), making
 * directories a tool left read-only writable first if it must, as `removeTree.ts` does; replies
 * `{ id, removed: true }` or `{ id, error, message }`. The engine's one thread is what bounds a cold run, and
 * removing a sandbox was an eighth of its time per process (rmdir, unlink, readdir); here it runs beside it.
 *
 * Its last argument is the engine's pid. It ignores SIGINT, SIGTERM and SIGHUP (the engine ends the groups it
 * started), runs in a session of its own (a signal to the engine's process group does not take it too), and exits
 * when its stdin closes, or when its parent is not that pid: when the engine is gone. Then it first SIGKILLs the
 * group of every process it started that is still running (the engine would have ended each), drops the requests
 * still buffered (starting one would leave its output files behind), and starts the engine's post-mortem.
 *
 * The post-mortem: `{ arm: { argv, log } }` gives a command to start, detached, with stderr appended to `log`, if
 * the engine dies (a sandboxer told that its parent is the dead engine: it removes the engine's sandboxes and clears
 * the reader slots the engine left in the store); `{ disarm: true }`, sent once the engine has closed its store,
 * takes it back. The engine's watchdog is this process, then: it is up before the first process runs, and nothing
 * heavier runs unless the engine dies.
 *
 * @internal
 */
export const SPAWNER_SOURCE = String.raw`"use strict";
const { spawn } = require("node:child_process");
const fs = require("node:fs");
for (const s of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(s, () => {});
const send = (m) => process.stdout.write(JSON.stringify(m) + "\n");
// The engine's pid comes as the last argument: a spawner that finds another parent (the engine died, even before
// this process got going) starts nothing more.
const engine = Number(process.argv[process.argv.length - 1]);
// The processes started whose exit has not been seen: each leads its own group, whose id cannot be reused meanwhile.
const running = new Set();
// What to start if the engine dies: { argv, log }, from the engine's last { arm } request, until it says { disarm }.
let postMortem;
const endAll = () => {
  for (const pid of running) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }
  if (postMortem !== undefined) {
    let log;
    try {
      log = fs.openSync(postMortem.log, "a", 0o600);
    } catch {}
    try {
      spawn(postMortem.argv[0], postMortem.argv.slice(1), {
        detached: true,
        stdio: ["ignore", "ignore", log === undefined ? "ignore" : log]
      }).unref();
    } catch {}
  }
  process.exit(0);
};
const start = (r) => {
  // Requests the engine wrote just before it died are not started: its sandboxes are being removed.
  if (process.ppid !== engine) endAll();
  // Nor is one whose sandbox is gone: its output files would be left beside nothing.
  if (!fs.existsSync(r.cwd)) return send({ id: r.id, error: "ENOENT", message: "no such directory: " + r.cwd });
  let out, err;
  try {
    out = fs.openSync(r.stdout, "w", 0o600);
    err = fs.openSync(r.stderr, "w", 0o600);
  } catch (e) {
    if (out !== undefined) fs.closeSync(out);
    return send({ id: r.id, error: e.code || "EIO", message: String(e.message) });
  }
  let child;
  try {
    child = spawn(r.argv[0], r.argv.slice(1), { cwd: r.cwd, env: r.env, detached: true, stdio: ["ignore", out, err] });
  } catch (e) {
    return send({ id: r.id, error: e.code || "EINVAL", message: String(e.message) });
  } finally {
    fs.closeSync(out);
    fs.closeSync(err);
  }
  child.once("error", (e) => send({ id: r.id, error: e.code || "EIO", message: String(e.message) }));
  if (child.pid !== undefined) running.add(child.pid);
  child.once("spawn", () => send({ id: r.id, pid: child.pid }));
  child.once("exit", (code, signal) => {
    running.delete(child.pid);
    // Whether anything of its group is left: the common answer, no, saves the engine a check of its own.
    let alone = false;
    try {
      process.kill(-child.pid, 0);
    } catch (e) {
      alone = e.code === "ESRCH";
    }
    send({ id: r.id, code, signal, alone });
  });
};
const gone = (e) => e.code === "ENOENT";
const removeDir = (dir, careful) => {
  for (let attempt = 1; ; attempt++) {
    try {
      if (careful) {
        const mode = fs.lstatSync(dir).mode;
        if ((mode & 0o700) !== 0o700) fs.chmodSync(dir, (mode & 0o7777) | 0o700);
      }
      for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
        const child = dir + "/" + entry.name;
        try {
          if (entry.isDirectory()) removeDir(child, careful);
          else fs.unlinkSync(child);
        } catch (e) {
          if (!gone(e)) throw e;
        }
      }
      fs.rmdirSync(dir);
      return;
    } catch (e) {
      if (gone(e)) return;
      if (e.code !== "ENOTEMPTY" || attempt === 5) throw e;
    }
  }
};
// What a process mounted in its sandbox (as root) is not the sandbox's to delete: see mounts.ts.
const mountUnder = (dir) => {
  let text;
  try {
    text = fs.readFileSync("/proc/self/mountinfo", "utf8");
  } catch {
    return undefined;
  }
  for (const line of text.split("\n")) {
    const at = line.split(" ")[4];
    if (at === undefined) continue;
    const mounted = at.replace(/\\([0-7]{3})/g, (_, o) => String.fromCharCode(parseInt(o, 8)));
    if (mounted === dir || mounted.startsWith(dir + "/")) return mounted;
  }
  return undefined;
};
const removeTree = (target) => {
  let st;
  try {
    st = fs.lstatSync(target);
  } catch (e) {
    if (gone(e)) return;
    throw e;
  }
  if (!st.isDirectory()) return fs.unlinkSync(target);
  const mounted = mountUnder(target);
  if (mounted !== undefined) {
    throw Object.assign(new Error("a file system is mounted at " + mounted + ": left in place, with what is under it"), {
      code: "EBUSY"
    });
  }
  try {
    return removeDir(target, false);
  } catch (e) {
    if (e.code !== "EACCES" && e.code !== "EPERM") throw e;
  }
  removeDir(target, true);
};
const remove = (r) => {
  try {
    for (const target of r.remove) removeTree(target);
    send({ id: r.id, removed: true });
  } catch (e) {
    send({ id: r.id, error: e.code || "EIO", message: String(e.message) });
  }
};
let buffered = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (chunk) => {
  buffered += chunk;
  for (let i = buffered.indexOf("\n"); i !== -1; i = buffered.indexOf("\n")) {
    const line = buffered.slice(0, i);
    buffered = buffered.slice(i + 1);
    let request;
    try {
      request = JSON.parse(line);
    } catch {
      continue;
    }
    if (Array.isArray(request.remove)) remove(request);
    else if (request.arm !== undefined) postMortem = request.arm;
    else if (request.disarm === true) postMortem = undefined;
    else start(request);
  }
});
process.stdin.on("end", endAll);
process.stdout.on("error", endAll);
`
