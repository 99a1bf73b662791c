import { useTitle } from "../lib/title";
import { Link } from "../components/Link";

/** NotFound is the page for a path the dashboard does not have. */
export function NotFound() {
  useTitle("Not found");
  return (
    <>
      <h1>No such page</h1>
      <p>
        The dashboard has no page at this address. <Link to="/">Go to the queues</Link>.
      </p>
    </>
  );
}
