package io.padlock

import io.lettuce.core.RedisClient
import io.lettuce.core.RedisURI
import io.padlock.driver.LettuceDriver
import java.util.concurrent.atomic.AtomicInteger
import kotlin.time.Duration.Companion.milliseconds
import kotlin.time.Duration.Companion.seconds
import kotlinx.coroutines.Dispatchers
import kotlinx.coroutines.async
import kotlinx.coroutines.awaitAll
import kotlinx.coroutines.coroutineScope
import kotlinx.coroutines.delay
import kotlinx.coroutines.launch
import kotlinx.coroutines.runBlocking
import kotlinx.coroutines.withContext
import kotlinx.coroutines.withTimeout
import kotlinx.coroutines.yield
import org.junit.jupiter.api.AfterAll
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.BeforeAll
import org.junit.jupiter.api.BeforeEach
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestInstance

/** The coroutine API on Lettuce, against a real server. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class CoroutinesTest {
    private lateinit var srv: Servers
    private lateinit var lettuce: RedisClient
    private lateinit var padlock: Padlock

    @BeforeAll
    fun start() {
        srv = Servers.standalone()
        lettuce = RedisClient.create(RedisURI.create("127.0.0.1", srv.port()))
        padlock = Padlock.builder(LettuceDriver(lettuce)).ttl(java.time.Duration.ofSeconds(2)).build()
    }

    @AfterAll
    fun stop() {
        padlock.close()
        lettuce.shutdown()
        srv.close()
    }

    @BeforeEach
    fun flush() {
        srv.raw("FLUSHALL")
    }

    /** LOCK.INFO's field on the server, or null when the key is free. */
    private fun field(key: String, name: String): String? {
        val flat = srv.raw("LOCK.INFO", key) as List<*>? ?: return null
        for (i in 0 until flat.size - 1 step 2) {
            if (Servers.text(flat[i]) == name) return Servers.text(flat[i + 1])
        }
        return null
    }

    @Test
    fun aNestedWithLockReenters() = runBlocking {
        padlock.withLock("order:1001") {
            assertEquals("1", field("order:1001", "count"))
            padlock.withLock("order:1001") { assertEquals("2", field("order:1001", "count")) }
            // A child coroutine inherits the holder.
            launch { padlock.withLock("order:1001") { assertEquals("2", field("order:1001", "count")) } }.join()
        }
        assertEquals(null, field("order:1001", "count"))
    }

    @Test
    fun reentryAfterResumingOnAnotherThread() = runBlocking {
        withContext(Dispatchers.Default) {
            padlock.withLock("hop") {
                val threads = mutableSetOf<String>()
                repeat(50) {
                    yield()
                    delay(1)
                    threads.add(Thread.currentThread().name)
                }
                padlock.withLock("hop") { assertEquals("2", field("hop", "count")) }
            }
        }
        assertEquals(null, field("hop", "count"))
    }

    @Test
    fun siblingsDoNotShare() = runBlocking {
        val inside = AtomicInteger()
        val most = AtomicInteger()
        coroutineScope {
            repeat(8) {
                launch(Dispatchers.Default) {
                    repeat(5) {
                        padlock.withLock("shared") {
                            most.accumulateAndGet(inside.incrementAndGet(), Math::max)
                            delay(5)
                            inside.decrementAndGet()
                        }
                    }
                }
            }
        }
        assertEquals(1, most.get(), "two sibling coroutines held at once")
    }

    @Test
    fun cancellingAWaitDropsItFromTheServer() = runBlocking {
        val other = padlock.getLock("busy").withHolder("someone")
        other.lock()
        val waiter = launch(Dispatchers.Default) { padlock.withLock("busy") { } }
        waitUntil { field("busy", "waiters") == "1" }
        waiter.cancel()
        waiter.join()
        waitUntil { field("busy", "waiters") == "0" }
        other.unlock()
        delay(100)
        assertEquals(null, field("busy", "count"), "the cancelled waiter never holds it")
    }

    @Test
    fun aLostHoldCancelsTheBlock() = runBlocking {
        val started = System.nanoTime()
        assertThrows(LockLostException::class.java) {
            runBlocking {
                padlock.withLock("doomed") {
                    srv.raw("DEL", "doomed")
                    delay(10_000)
                }
            }
        }
        assertTrue(System.nanoTime() - started < 3_000_000_000L, "cancelled at once, not after the delay")
    }

    /** A thousand suspended waits hold no thread and no connection of their own. */
    @Test
    fun thousandsOfWaitsOnNoThreads() = runBlocking {
        val other = padlock.getLock("hot").withHolder("someone")
        other.lock()
        val threadsBefore = Thread.activeCount()
        val served = AtomicInteger()
        val waits = (1..1000).map {
            async(Dispatchers.Default) { padlock.withLock("hot") { served.incrementAndGet() } }
        }
        waitUntil(20_000) { field("hot", "waiters") == "1000" }
        val grew = Thread.activeCount() - threadsBefore
        assertTrue(grew < 50, "$grew threads for 1,000 waits")
        other.unlock()
        withTimeout(30.seconds) { waits.awaitAll() }
        assertEquals(1000, served.get())
    }

    private suspend fun waitUntil(ms: Long = 5000, ok: () -> Boolean) {
        withTimeout(ms.milliseconds) {
            while (!ok()) {
                delay(10)
            }
        }
    }
}
