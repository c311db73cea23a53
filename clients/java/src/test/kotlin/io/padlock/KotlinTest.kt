package io.padlock

import io.padlock.driver.JedisDriver
import kotlin.concurrent.withLock
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Test
import redis.clients.jedis.RedisClient

/** From Kotlin: `withLock { }` (kotlin-stdlib's, on any Lock) and `use { }` on holds. */
class KotlinTest {
    @Test
    fun withLockAndUse() {
        Servers.standalone().use { srv ->
            RedisClient.create("127.0.0.1", srv.port()).use { jedis ->
                Padlock.builder(JedisDriver(jedis)).build().use { padlock ->
                    val lock = padlock.getLock("order:1001")
                    val fence = lock.withLock {
                        lock.withLock { assertEquals(2, lock.holdCount) }
                        lock.fence()
                    }
                    assertEquals(0, lock.holdCount)
                    lock.hold().use { assertEquals(1, lock.holdCount) }
                    assertFalse(lock.isHeldByCurrentThread)
                    assert(fence > 0)
                }
            }
        }
    }
}
