/**
 * The two orders a run walks its graph in. Plain code: the CLI's no-op check (before Effect is loaded) and the
 * engine must agree on both.
 *
 * @internal
 */

/** Every target and its transitive deps, each once, in the order a run lists them (a target, then its deps). */
export const closure = (
  depsOf: (name: string) => ReadonlyArray<string>,
  targets: ReadonlyArray<string>
): Array<string> => {
  const seen = new Set<string>()
  const out: Array<string> = []
  const visit = (name: string) => {
    if (seen.has(name)) return
    seen.add(name)
    out.push(name)
    for (const dep of depsOf(name)) visit(dep)
  }
  targets.forEach(visit)
  return out
}

/** `names` (closed under deps) with every process after its deps. */
export const depsFirst = (
  depsOf: (name: string) => ReadonlyArray<string>,
  names: ReadonlyArray<string>
): Array<string> => {
  const done = new Set<string>()
  const out: Array<string> = []
  const visit = (name: string) => {
    if (done.has(name)) return
    done.add(name)
    for (const dep of depsOf(name)) visit(dep)
    out.push(name)
  }
  names.forEach(visit)
  return out
}
