@file:JvmName("PadlockCoroutines")

package io.padlock

import java.util.UUID
import java.util.concurrent.CompletableFuture
import java.util.concurrent.CompletionException
import kotlin.coroutines.AbstractCoroutineContextElement
import kotlin.coroutines.CoroutineContext
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlin.time.Duration
import kotlin.time.toJavaDuration
import kotlinx.coroutines.CancellationException
import kotlinx.coroutines.CompletableDeferred
import kotlinx.coroutines.CoroutineScope
import kotlinx.coroutines.CoroutineStart
import kotlinx.coroutines.NonCancellable
import kotlinx.coroutines.cancel
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.currentCoroutineContext
import kotlinx.coroutines.launch
import kotlinx.coroutines.suspendCancellableCoroutine
import kotlinx.coroutines.withContext

/**
 * The holder of a coroutine's holds. Coroutines hop threads at every
 * suspension, so a thread's holder is wrong for them: the holder is this
 * context element instead. `withLock` puts one in the block's context (the
 * one already there, or a fresh one), so child coroutines inherit it and a
 * nested `withLock` on the same key reenters, whatever thread it resumes
 * on, while sibling coroutines each hold as a holder of their own. Add one
 * to a scope yourself to share a holder on purpose.
 */
class PadlockHolder(val holder: String) : AbstractCoroutineContextElement(PadlockHolder) {
    companion object Key : CoroutineContext.Key<PadlockHolder> {
        /** A fresh random holder. */
        fun fresh(): PadlockHolder = PadlockHolder(UUID.randomUUID().toString())
    }

    override fun toString(): String = "PadlockHolder($holder)"
}

/**
 * Runs [block] holding the lock at [key] ([ttl]: the lease's grace, the
 * Padlock's by default). The wait suspends, holding no thread; cancelling the
 * coroutine while it waits takes the wait out of the server's queue. A hold
 * lost while [block] runs cancels it, and `withLock` throws
 * [LockLostException].
 */
suspend fun <T> Padlock.withLock(key: String, ttl: Duration? = null, block: suspend CoroutineScope.() -> T): T {
    val base = getLock(key).let { if (ttl != null) it.withTtl(ttl.toJavaDuration()) else it }
    return holding({ base.withHolder(it) }, { it.lockAsync() }, { it.unlockAsync() }, { l, r -> l.onLost(r) }, block)
}

/** Runs [block] holding [permits] of the semaphore at [key] with [limit] permits, as [withLock]. */
suspend fun <T> Padlock.withPermits(key: String, limit: Int, permits: Int = 1, block: suspend CoroutineScope.() -> T): T =
    holding({ getSemaphore(key, limit).withHolder(it) }, { it.acquireAsync(permits) },
        { it.releaseAsync(permits) }, { s, r -> s.onLost(r) }, block)

/** Runs [block] holding a read hold of the read-write lock at [key], as [withLock]. */
suspend fun <T> Padlock.withReadLock(key: String, block: suspend CoroutineScope.() -> T): T =
    holding({ getReadWriteLock(key).withHolder(it).readLock() }, { it.lockAsync() }, { it.unlockAsync() },
        { l, r -> l.onLost(r) }, block)

/** Runs [block] holding the write hold of the read-write lock at [key] (an upgrade when this holder reads). */
suspend fun <T> Padlock.withWriteLock(key: String, block: suspend CoroutineScope.() -> T): T =
    holding({ getReadWriteLock(key).withHolder(it).writeLock() }, { it.lockAsync() }, { it.unlockAsync() },
        { l, r -> l.onLost(r) }, block)

private class Lost : CancellationException("the hold was lost")

private suspend fun <H, T> holding(
    make: (String) -> H,
    acquire: (H) -> CompletableFuture<Boolean>,
    release: (H) -> CompletableFuture<Void>,
    listen: (H, Runnable) -> Unit,
    block: suspend CoroutineScope.() -> T,
): T {
    val holder = currentCoroutineContext()[PadlockHolder] ?: PadlockHolder.fresh()
    val h = make(holder.holder)
    val lost = CompletableDeferred<Unit>()
    listen(h, Runnable { lost.complete(Unit) })
    acquire(h).awaitCancelling()
    var failed: Throwable? = null
    try {
        return coroutineScope {
            val watch = launch(start = CoroutineStart.UNDISPATCHED) {
                lost.await()
                this@coroutineScope.cancel(Lost())
            }
            try {
                withContext(holder) { block() }
            } finally {
                watch.cancel()
            }
        }
    } catch (e: CancellationException) {
        failed = e
        if (lost.isCompleted) {
            throw LockLostException("the hold was lost while its block ran").also { failed = it }
        }
        throw e
    } catch (e: Throwable) {
        failed = e
        throw e
    } finally {
        withContext(NonCancellable) {
            try {
                release(h).awaitCancelling()
            } catch (e: Exception) {
                // A lost hold has nothing to release; any other failure is
                // the caller's to know, unless the block failed first.
                if (!lost.isCompleted && failed == null) throw e
            }
        }
    }
}

/** Waits for the future; cancelling the coroutine cancels it (which takes a wait back). */
private suspend fun <T> CompletableFuture<T>.awaitCancelling(): T = suspendCancellableCoroutine { cont ->
    whenComplete { v, e ->
        if (e == null) {
            cont.resume(v)
        } else {
            cont.resumeWithException(if (e is CompletionException && e.cause != null) e.cause!! else e)
        }
    }
    cont.invokeOnCancellation { cancel(true) }
}
