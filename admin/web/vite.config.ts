import { defineConfig } from "vite";

// The dashboard is served by `conveyor server` under /ui/ from the files in
// ../dist, which are committed and embedded in the binary (admin/admin.go).
// `make ui-check` rebuilds them and fails if they differ, so the build must
// be reproducible: no timestamps, no absolute paths, hashed names only.
export default defineConfig({
  base: "/ui/",
  esbuild: {
    jsx: "automatic",
    jsxImportSource: "preact",
    legalComments: "none",
  },
  build: {
    outDir: "../dist",
    emptyOutDir: true,
    target: "es2022",
    sourcemap: false,
    modulePreload: { polyfill: false },
    chunkSizeWarningLimit: 400,
  },
  // `npm run dev` serves the source with hot reload and forwards the RPCs
  // to a server on the default address (start it with `make run`).
  server: {
    proxy: {
      "/conveyor.v1.": "http://127.0.0.1:7420",
    },
  },
});
