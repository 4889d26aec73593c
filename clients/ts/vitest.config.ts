import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    // `make test` wants one line per file, not a progress display.
    reporters: ["dot"],
  },
});
