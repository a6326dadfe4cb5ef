/**
 * REAPI's `ActionCache` over gRPC: an action's serialized `ActionResult`, got (none on NOT_FOUND) and updated.
 *
 * @internal
 */
import * as Effect from "effect/Effect"
import * as Option from "effect/Option"
import * as Digest from "../../../../domain/Digest.js"
import type { RemoteError } from "../../RemoteErrors.js"
import * as Proto from "../proto.js"
import { type Connection, digestArg, unary, V2 } from "./connection.js"

export const getActionResult = (
  conn: Connection,
  action: Digest.Digest
): Effect.Effect<Option.Option<Uint8Array>, RemoteError> =>
  Effect.map(
    unary<Record<string, unknown>>(
      conn,
      `${V2}ActionCache`,
      "GetActionResult",
      ["GetActionResultRequest", {
        instance_name: conn.settings.instanceName,
        action_digest: digestArg(action)
      }],
      "ActionResult",
      "entry",
      { digest: Digest.format(action), actionId: action.hash }
    ),
    (result) => Option.some(Proto.encode("ActionResult", result))
  ).pipe(Effect.catchIf((e) => e.code === "NOT_FOUND", () => Effect.succeedNone))

export const updateActionResult = (
  conn: Connection,
  action: Digest.Digest,
  result: Uint8Array
): Effect.Effect<void, RemoteError> =>
  Effect.asVoid(unary(
    conn,
    `${V2}ActionCache`,
    "UpdateActionResult",
    ["UpdateActionResultRequest", {
      instance_name: conn.settings.instanceName,
      action_digest: digestArg(action),
      action_result: Proto.decode("ActionResult", result)
    }],
    "ActionResult",
    "unary",
    { digest: Digest.format(action), actionId: action.hash }
  ))
