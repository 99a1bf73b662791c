/**
 * The SDK's version, sent as Hello.sdk_version (semver, as §8 of the
 * protocol asks, so a server can admit or refuse it by version).
 */
export const VERSION = "0.1.0";
