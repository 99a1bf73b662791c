import { render } from "preact";
import "./styles.css";
import { App } from "./App";

render(<App />, document.getElementById("app") as HTMLElement);
