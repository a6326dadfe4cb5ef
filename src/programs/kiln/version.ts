/** kiln's version, as `kiln --version` prints it (one constant, which the library's remote cache names too). */
export { VERSION } from "../../domain/Version.js"
