import assert from "node:assert/strict"
import { greet } from "../build/greet.js"
import { config } from "../gen/config.js"

assert.equal(greet("Hi", "you"), "Hi, you!")
assert.equal(typeof config.greeting, "string")
console.log("1 passed, 0 failed")
