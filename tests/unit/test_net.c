/* Socket set-up: listen, connect, accept, names and both address families. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include <dragstrip/clock.h>
#include <dragstrip/error.h>
#include <dragstrip/net.h>

static uint16_t bound_port(int fd)
{
        struct sockaddr_storage addr;
        socklen_t len = sizeof(addr);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&addr, &len), 0);
        if (addr.ss_family == AF_INET)
                return ntohs(((struct sockaddr_in *)&addr)->sin_port);
        return ntohs(((struct sockaddr_in6 *)&addr)->sin6_port);
}

/* A port nobody listens on: let the kernel pick one, then give it back. */
static uint16_t closed_port(void)
{
        int fd = ds_net_listen("127.0.0.1", 0, SOCK_STREAM, NULL);
        assert_true(fd >= 0);
        uint16_t port = bound_port(fd);
        assert_int_equal(close(fd), 0);
        return port;
}

static void test_port_parse_accepts_1_to_65535_only(void **state)
{
        (void)state;
        uint16_t port = 7;
        assert_int_equal(ds_port_parse("1", &port), 0);
        assert_int_equal(port, 1);
        assert_int_equal(ds_port_parse("65535", &port), 0);
        assert_int_equal(port, 65535);
        assert_int_equal(ds_port_parse("05001", &port), 0);
        assert_int_equal(port, 5001);
        static const char *const junk[] = {
            "", "0", "65536", "-1", "+1", " 1", "1 ", "1a", "0x10", "99999999999999999999", "5K"};
        for (size_t i = 0; i < sizeof(junk) / sizeof(junk[0]); i++)
                if (ds_port_parse(junk[i], &port) != -EINVAL)
                        fail_msg("port '%s' should be -EINVAL", junk[i]);
        assert_int_equal(ds_port_parse(NULL, &port), -EINVAL);
        assert_int_equal(port, 5001);
}

static void test_listen_twice_on_a_port_says_it_is_in_use(void **state)
{
        (void)state;
        struct ds_error err;
        int fd = ds_net_listen(NULL, 0, SOCK_STREAM, &err);
        assert_true(fd >= 0);
        uint16_t port = bound_port(fd);
        char expected[64];
        snprintf(expected, sizeof(expected), "port %u is in use", port);

        assert_int_equal(ds_net_listen(NULL, port, SOCK_STREAM, &err), -EADDRINUSE);
        assert_string_equal(err.text, expected);
        /* The wildcard socket takes IPv4 too, so a v4-only listen collides with it. */
        assert_int_equal(ds_net_listen("127.0.0.1", port, SOCK_STREAM, &err), -EADDRINUSE);
        assert_string_equal(err.text, expected);
        assert_int_equal(close(fd), 0);

        fd = ds_net_listen(NULL, 0, SOCK_DGRAM, &err);
        assert_true(fd >= 0);
        assert_int_equal(ds_net_listen(NULL, bound_port(fd), SOCK_DGRAM, &err), -EADDRINUSE);
        assert_int_equal(close(fd), 0);
}

static void test_connect_to_a_closed_port_is_refused_naming_it(void **state)
{
        (void)state;
        struct ds_error err;
        uint16_t port = closed_port();
        char expected[96];
        snprintf(expected, sizeof(expected), "connect to 127.0.0.1 port %u: Connection refused",
                 port);
        assert_int_equal(ds_net_connect("127.0.0.1", port, SOCK_STREAM, 2000, &err), -ECONNREFUSED);
        assert_string_equal(err.text, expected);
        /* A name with several addresses: every one refused, still "refused". */
        assert_int_equal(ds_net_connect("localhost", port, SOCK_STREAM, 0, &err), -ECONNREFUSED);
        assert_non_null(strstr(err.text, "localhost"));
}

/* Connects to host on the listener's port and checks both ends' view of each other. */
static void assert_connects(int listen_fd, const char *host, const char *peer_prefix)
{
        struct ds_error err;
        char peer[64] = "";
        int client = ds_net_connect(host, bound_port(listen_fd), SOCK_STREAM, 2000, &err);
        if (client < 0)
                fail_msg("connect %s: %s", host, err.text);
        int server = ds_net_accept(listen_fd, 2000, peer, sizeof(peer), &err);
        if (server < 0)
                fail_msg("accept from %s: %s", host, err.text);
        if (strncmp(peer, peer_prefix, strlen(peer_prefix)) != 0)
                fail_msg("peer of %s is '%s', expected it to start '%s'", host, peer, peer_prefix);
        /* The client names the server as the server names it: address and port. */
        char server_name[64], expected[64];
        snprintf(expected, sizeof(expected), "%.*s:%u", (int)(strrchr(peer, ':') - peer), peer,
                 bound_port(listen_fd));
        assert_string_equal(ds_net_peer_name(client, server_name, sizeof(server_name)), expected);

        char byte = 'x';
        assert_int_equal(write(client, &byte, 1), 1);
        byte = 0;
        assert_int_equal(read(server, &byte, 1), 1);
        assert_int_equal(byte, 'x');
        assert_int_equal(close(client), 0);
        assert_int_equal(close(server), 0);
}

static bool have_ipv6_loopback(void)
{
        return access("/proc/net/if_inet6", F_OK) == 0;
}

static void test_connect_over_ipv4_ipv6_and_a_name(void **state)
{
        (void)state;
        struct ds_error err;
        int fd = ds_net_listen(NULL, 0, SOCK_STREAM, &err);
        assert_true(fd >= 0);
        assert_connects(fd, "127.0.0.1", "127.0.0.1:"); /* v4-mapped, shown as v4 */
        if (have_ipv6_loopback())
                assert_connects(fd, "::1", "[::1]:");
        else
                print_message("no IPv6 here: ::1 not tried\n");
        assert_connects(fd, "localhost", "");
        assert_int_equal(close(fd), 0);

        fd = ds_net_listen("127.0.0.1", 0, SOCK_STREAM, &err);
        assert_true(fd >= 0);
        assert_connects(fd, "127.0.0.1", "127.0.0.1:");
        assert_int_equal(close(fd), 0);
}

static void test_accept_times_out_quickly(void **state)
{
        (void)state;
        struct ds_error err;
        char name[64];
        int fd = ds_net_listen("127.0.0.1", 0, SOCK_STREAM, &err);
        assert_string_equal(ds_net_peer_name(fd, name, sizeof(name)), "?"); /* no peer */
        assert_true(fd >= 0);
        uint64_t start = ds_now_ns();
        assert_int_equal(ds_net_accept(fd, 100, NULL, 0, &err), -ETIMEDOUT);
        uint64_t took = ds_now_ns() - start;
        assert_true(took >= 100000000u && took < 1000000000u);
        assert_string_equal(err.text, "no connection within 100 ms");
        assert_int_equal(ds_net_accept(fd, 0, NULL, 0, &err), -ETIMEDOUT);
        assert_int_equal(close(fd), 0);
}

static void test_udp_connect_sends_to_the_listener(void **state)
{
        (void)state;
        struct ds_error err;
        int server = ds_net_listen(NULL, 0, SOCK_DGRAM, &err);
        assert_true(server >= 0);
        int client = ds_net_connect("127.0.0.1", bound_port(server), SOCK_DGRAM, 0, &err);
        assert_true(client >= 0);
        assert_int_equal(send(client, "ping", 4, 0), 4);
        char buf[8] = "";
        assert_int_equal(recv(server, buf, sizeof(buf), 0), 4);
        assert_memory_equal(buf, "ping", 4);
        assert_int_equal(close(client), 0);
        assert_int_equal(close(server), 0);
}

static void test_set_buffers_rejects_nonpositive_and_sets_both(void **state)
{
        (void)state;
        struct ds_error err;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        assert_true(fd >= 0);
        assert_int_equal(ds_net_set_buffers(fd, 0, &err), -EINVAL);
        assert_int_equal(ds_net_set_buffers(fd, -5, &err), -EINVAL);
        assert_int_equal(ds_net_set_buffers(fd, 65536, &err), 0);
        int size = 0;
        socklen_t len = sizeof(size);
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, &len), 0);
        assert_true(size >= 65536); /* Linux doubles it for bookkeeping */
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, &len), 0);
        assert_true(size >= 65536);
        assert_int_equal(close(fd), 0);
        assert_int_equal(ds_net_set_buffers(fd, 65536, &err), -EBADF);
        assert_non_null(strstr(err.text, "SO_SNDBUF 65536: "));
}

static void test_format_shows_v4_v6_and_mapped_addresses(void **state)
{
        (void)state;
        char buf[64];
        struct sockaddr_in in = {.sin_family = AF_INET, .sin_port = htons(5001)};
        assert_int_equal(inet_pton(AF_INET, "10.1.2.3", &in.sin_addr), 1);
        assert_string_equal(ds_net_format((struct sockaddr *)&in, sizeof(in), buf, sizeof(buf)),
                            "10.1.2.3:5001");

        struct sockaddr_in6 in6 = {.sin6_family = AF_INET6, .sin6_port = htons(65535)};
        assert_int_equal(inet_pton(AF_INET6, "fe80::1:2", &in6.sin6_addr), 1);
        assert_string_equal(ds_net_format((struct sockaddr *)&in6, sizeof(in6), buf, sizeof(buf)),
                            "[fe80::1:2]:65535");
        assert_int_equal(inet_pton(AF_INET6, "::ffff:192.168.0.9", &in6.sin6_addr), 1);
        assert_string_equal(ds_net_format((struct sockaddr *)&in6, sizeof(in6), buf, sizeof(buf)),
                            "192.168.0.9:65535");

        /* A truncated address length is not read past. */
        assert_string_equal(ds_net_format((struct sockaddr *)&in6, 8, buf, sizeof(buf)), "?");
        struct sockaddr unix_addr = {.sa_family = AF_UNIX};
        assert_string_equal(ds_net_format(&unix_addr, sizeof(unix_addr), buf, sizeof(buf)), "?");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
            cmocka_unit_test(test_port_parse_accepts_1_to_65535_only),
            cmocka_unit_test(test_listen_twice_on_a_port_says_it_is_in_use),
            cmocka_unit_test(test_connect_to_a_closed_port_is_refused_naming_it),
            cmocka_unit_test(test_connect_over_ipv4_ipv6_and_a_name),
            cmocka_unit_test(test_accept_times_out_quickly),
            cmocka_unit_test(test_udp_connect_sends_to_the_listener),
            cmocka_unit_test(test_set_buffers_rejects_nonpositive_and_sets_both),
            cmocka_unit_test(test_format_shows_v4_v6_and_mapped_addresses),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
