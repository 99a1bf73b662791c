// Helpers the Client's tests share.
import assert from "node:assert/strict";

/** rejects returns what promise rejects with, failing the test if it resolves. */
export async function rejects(promise) {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  assert.fail("the call succeeded");
}

let seq = 0;
/** ulid makes a fresh, valid ULID (time part now, random part a counter). */
export function ulid() {
  const A = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
  let t = Date.now();
  let time = "";
  for (let i = 0; i < 10; i++) {
    time = A[t % 32] + time;
    t = Math.floor(t / 32);
  }
  let n = ++seq * 7919 + process.pid;
  let rand = "";
  for (let i = 0; i < 16; i++) {
    rand = A[n % 32] + rand;
    n = Math.floor(n / 32);
  }
  return time + rand;
}
