// The Connect clients the pages use: the services generated from our protos,
// over the Connect protocol (binary) to the origin that served the page.
import {
  Code,
  ConnectError,
  createClient,
  createContextKey,
  createContextValues,
  type Interceptor,
} from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-web";
import { AdminService, TaskService } from "../gen/conveyor/v1/service_pb";
import { authState, currentToken, saveToken, tokenRefused } from "./auth";

// trialToken, set on a call, is a token to try instead of the kept one (the
// login prompt checks a token before keeping it).
const trialToken = createContextKey<string>("");

// bearer sends the token, and sends anyone whose token stops working back
// to the login prompt.
const bearer: Interceptor = (next) => async (req) => {
  const trial = req.contextValues.get(trialToken);
  const token = trial || currentToken();
  if (token) {
    req.header.set("Authorization", `Bearer ${token}`);
  }
  try {
    return await next(req);
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unauthenticated && !trial) {
      tokenRefused(e.rawMessage);
    }
    throw err;
  }
};

const transport = createConnectTransport({
  baseUrl: location.origin,
  useBinaryFormat: true,
  interceptors: [bearer],
});

/** admin is the AdminService client. */
export const admin = createClient(AdminService, transport);

/** tasks is the TaskService client (GetTask). */
export const tasks = createClient(TaskService, transport);

/** asError turns anything thrown by a call into a ConnectError. */
export function asError(err: unknown): ConnectError {
  return ConnectError.from(err);
}

/** isAbort reports whether err is the result of our own cancelation. */
export function isAbort(err: unknown): boolean {
  return ConnectError.from(err).code === Code.Canceled;
}

/**
 * checkServer asks the server who we are: it decides whether the dashboard
 * shows, or the login prompt (the server has a token and we have none, or
 * a wrong one).
 */
export async function checkServer(): Promise<void> {
  try {
    await admin.getClusterInfo({});
    authState.set({ status: "ready", withToken: currentToken() !== "" });
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unauthenticated) {
      return; // the interceptor has set the login state
    }
    authState.set({ status: "unreachable", message: e.message });
  }
}

/**
 * tryToken checks token against the server and keeps it when accepted. It
 * returns an error message to show, or "" on success.
 */
export async function tryToken(token: string): Promise<string> {
  try {
    await admin.getClusterInfo({}, { contextValues: createContextValues().set(trialToken, token) });
  } catch (err) {
    const e = ConnectError.from(err);
    if (e.code === Code.Unauthenticated) {
      return `The server refused this token (${e.rawMessage}). Check it and try again.`;
    }
    return e.message;
  }
  saveToken(token);
  authState.set({ status: "ready", withToken: true });
  return "";
}
