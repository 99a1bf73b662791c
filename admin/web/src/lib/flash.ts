import { store } from "./store";

/** flash carries a message to the next page (after a form saved, say). */
export const flash = store<string>("");
