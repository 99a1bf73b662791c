import { useEffect } from "preact/hooks";
import { authState } from "./lib/auth";
import { checkServer, admin } from "./lib/api";
import { usePoll } from "./lib/poll";
import { useLocation } from "./lib/router";
import { useStore } from "./lib/store";
import { Layout } from "./components/Layout";
import { Login } from "./components/Login";
import { Loading } from "./components/Status";
import { Overview } from "./pages/Overview";
import { QueuePage } from "./pages/Queue";
import { TasksPage } from "./pages/Tasks";
import { TaskPage } from "./pages/Task";
import { AcrossPage } from "./pages/Across";
import { GroupsPage } from "./pages/Groups";
import { CronsPage } from "./pages/Crons";
import { CronEditPage } from "./pages/CronEdit";
import { WorkersPage } from "./pages/Workers";
import { NotFound } from "./pages/NotFound";

/** App shows the login prompt, or the dashboard once the server lets us in. */
export function App() {
  const auth = useStore(authState);
  useEffect(() => void checkServer(), []);
  switch (auth.status) {
    case "checking":
      return (
        <main class="login" id="main">
          <Loading what="Connecting to the server" />
        </main>
      );
    case "login":
      return <Login message={auth.message} />;
    case "unreachable":
      return (
        <main class="login" id="main">
          <div class="error" role="alert">
            <h1>Cannot reach the server</h1>
            <p>{auth.message}</p>
            <button type="button" onClick={() => void checkServer()}>
              Try again
            </button>
          </div>
        </main>
      );
    case "ready":
      return <Dashboard withToken={auth.withToken} />;
  }
}

function Dashboard({ withToken }: { withToken: boolean }) {
  const cluster = usePoll((signal) => admin.getClusterInfo({}, { signal }), null, []);
  return (
    <Layout withToken={withToken} version={cluster.data?.version}>
      <Page />
    </Layout>
  );
}

// Page picks the page for the current path.
function Page() {
  const { path } = useLocation();
  let parts: string[];
  try {
    parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  } catch {
    return <NotFound />; // a malformed escape: no page of ours
  }
  const [head, id, sub] = parts;
  if (!head) return <Overview />;
  if (head === "queues" && id && !sub) return <QueuePage name={id} />;
  if (head === "tasks" && !id) return <TasksPage />;
  if (head === "tasks" && id && !sub) return <TaskPage id={id} />;
  if (head === "across" && !id) return <AcrossPage />;
  if (head === "groups" && !id) return <GroupsPage />;
  if (head === "crons" && !id) return <CronsPage />;
  if (head === "crons" && id === "new" && !sub) return <CronEditPage />;
  if (head === "crons" && id && sub === "edit") return <CronEditPage id={id} />;
  if (head === "workers" && !id) return <WorkersPage />;
  return <NotFound />;
}
