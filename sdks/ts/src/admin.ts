import { type Client as ConnectClient, createClient } from "@connectrpc/connect";
import { AdminService } from "./gen/conveyor/v1/service_pb.js";
import { type ConnectionOptions, createTransport } from "./transport.js";

/**
 * AdminClient is the Connect client of the server's AdminService (queues,
 * tasks, cron entries, workers, the cluster). Its methods take and return
 * the generated messages; their errors are ConnectErrors, which
 * toConveyorError turns into the SDK's typed classes.
 */
export type AdminClient = ConnectClient<typeof AdminService>;

/**
 * createAdminClient returns an AdminService client of the server opts
 * names, over the same HTTP/2 transport as the Client (token, TLS CA,
 * protocol, keepalive pings). It does not connect: the first call does.
 */
export function createAdminClient(opts: ConnectionOptions): AdminClient {
  return createClient(AdminService, createTransport(opts));
}
