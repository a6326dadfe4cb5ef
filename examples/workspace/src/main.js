import { config } from "../gen/config.js"
import { greet } from "./greet.js"

// The program's entry point.
export const main = () => greet(config.greeting, config.audience)
