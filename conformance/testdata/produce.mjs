// The TypeScript producer of the cross-language test: it reads a JSON
// array of {type, queue, payload (base64)} from stdin, enqueues each with
// the TypeScript SDK's Client (the payload's bytes as they are), and
// prints the task ids as a JSON array. The SDK is ../../sdks/ts (built).
import { Client } from "../../sdks/ts/dist/index.js";

let input = "";
for await (const chunk of process.stdin) input += chunk;
const items = JSON.parse(input);
const client = new Client({ url: process.env.CONVEYOR_URL, protocol: process.env.CONVEYOR_PROTOCOL || "grpc" });
const tasks = await Promise.all(
  items.map((it) => client.enqueue(it.type, Buffer.from(it.payload, "base64"), { queue: it.queue })),
);
await client.close();
process.stdout.write(JSON.stringify(tasks.map((t) => t.id)) + "\n");
