// TypeScript clients for padlock, the Redis module of native distributed
// locks, on ioredis, node-redis (`@redis/client` 5) or valkey-glide.

export { type Arg, type Backend, type Client, type Conn, backendOf } from "./backend.js";
export { DeadlockError, LockLostError, NotAcquiredError, NotHeldError, PadlockError } from "./errors.js";
export { type AcquireOptions, Hold, type HoldOptions, newHolder } from "./hold.js";
export { type ReplicasOptions } from "./replicas.js";
export { type GlideFactory, glide } from "./glide.js";
export { currentHolder, withHolder } from "./holders.js";
export {
  type Edge,
  type Hot,
  Lock,
  MultiLock,
  ReadWriteLock,
  RwHold,
  Semaphore,
  type SemaphoreOptions,
  graph,
  toDot,
  top,
} from "./kinds.js";
