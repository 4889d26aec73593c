import { fileURLToPath } from "node:url";

import { defineConfig } from "vitest/config";

export default defineConfig({
  // `@tickwire/arena` imports `@tickwire/client` by name, as a game's package does; here that
  // name is the SDK's source, so the tests of both packages run against the code in src/.
  resolve: {
    alias: { "@tickwire/client": fileURLToPath(new URL("./src/index.ts", import.meta.url)) },
  },
  test: {
    include: ["test/**/*.test.ts"],
    // `make test` wants one line per test file and the totals, not a progress display.
    reporters: [["default", { summary: false }]],
  },
});
