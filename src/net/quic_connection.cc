#include "net/quic_connection.h"

#include "log/error_log.h"
#include "net/quic_endpoint.h"
#include "net/quic_tls.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <ctime>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <ngtcp2/ngtcp2.h>
#include <ngtcp2/ngtcp2_crypto.h>

namespace lepus {

struct QuicConnection::ConnRef : ngtcp2_crypto_conn_ref {};

namespace {

ngtcp2_path make_path(const SocketAddress& local, const SocketAddress& peer) {
    return ngtcp2_path{
        {const_cast<sockaddr*>(&local.storage.any), local.length},
        {const_cast<sockaddr*>(&peer.storage.any), peer.length},
        nullptr,
    };
}

SocketAddress to_address(const ngtcp2_addr& address) {
    SocketAddress out;
    out.length = std::min<socklen_t>(address.addrlen, sizeof out.storage);
    std::memcpy(&out.storage, address.addr, out.length);
    return out;
}

} // namespace

// ngtcp2's callbacks, each a thin step into the connection or its application.
struct QuicCallbacks {
    static QuicConnection& self(void* user_data) {
        return *static_cast<QuicConnection*>(user_data);
    }

    static int recv_stream_data(ngtcp2_conn*, uint32_t flags, int64_t id, uint64_t,
                                const uint8_t* data, size_t size, void* user_data, void*) {
        QuicConnection& c = self(user_data);
        c.highest_stream_ = std::max(c.highest_stream_, id);
        if (!c.application_) return 0;
        int64_t consumed =
            c.application_->receive(id, data, size, flags & NGTCP2_STREAM_DATA_FLAG_FIN);
        if (consumed < 0) return NGTCP2_ERR_CALLBACK_FAILURE;
        c.extend_stream_offset(id, uint64_t(consumed));
        return 0;
    }
    static int acked_stream_data_offset(ngtcp2_conn*, int64_t id, uint64_t, uint64_t bytes,
                                        void* user_data, void*) {
        QuicConnection& c = self(user_data);
        if (c.application_ && c.application_->acknowledged(id, bytes) != 0)
            return NGTCP2_ERR_CALLBACK_FAILURE;
        return 0;
    }
    static int stream_close(ngtcp2_conn* conn, uint32_t flags, int64_t id, uint64_t app_error,
                            void* user_data, void*) {
        QuicConnection& c = self(user_data);
        // The stream still exists here: its count of packets declared lost.
        if (size_t lost = ngtcp2_conn_get_stream_loss_count(conn, id))
            QuicGauges::bump(c.endpoint_.gauges().packets_lost, lost);
        if (!(flags & NGTCP2_STREAM_CLOSE_FLAG_APP_ERROR_CODE_SET))
            app_error = 0x100; // H3_NO_ERROR
        if (c.application_ && c.application_->stream_closed(id, app_error) != 0)
            return NGTCP2_ERR_CALLBACK_FAILURE;
        return 0;
    }
    static int stream_reset(ngtcp2_conn*, int64_t id, uint64_t, uint64_t, void* user_data, void*) {
        QuicConnection& c = self(user_data);
        if (c.application_ && c.application_->stream_reset(id) != 0)
            return NGTCP2_ERR_CALLBACK_FAILURE;
        return 0;
    }
    static int stream_stop_sending(ngtcp2_conn*, int64_t id, uint64_t, void* user_data, void*) {
        return stream_reset(nullptr, id, 0, 0, user_data, nullptr);
    }
    static int extend_max_stream_data(ngtcp2_conn*, int64_t id, uint64_t, void* user_data, void*) {
        QuicConnection& c = self(user_data);
        if (c.application_ && c.application_->stream_unblocked(id) != 0)
            return NGTCP2_ERR_CALLBACK_FAILURE;
        return 0;
    }
    static int extend_max_remote_streams_bidi(ngtcp2_conn*, uint64_t max, void* user_data) {
        QuicConnection& c = self(user_data);
        if (c.application_) c.application_->client_streams(max);
        return 0;
    }
    static void rand(uint8_t* dest, size_t size, const ngtcp2_rand_ctx*) {
        gnutls_rnd(GNUTLS_RND_RANDOM, dest, size);
    }
    static int get_new_connection_id(ngtcp2_conn*, ngtcp2_cid* cid, uint8_t* token, size_t,
                                     void* user_data) {
        QuicConnection& c = self(user_data);
        c.endpoint_.make_cid(*cid);
        // Stateless resets (RFC 9000 §10.3) are not sent by this slice: a random token.
        gnutls_rnd(GNUTLS_RND_RANDOM, token, NGTCP2_STATELESS_RESET_TOKENLEN);
        c.endpoint_.add_cid(*cid, &c);
        return 0;
    }
    static int remove_connection_id(ngtcp2_conn*, const ngtcp2_cid* cid, void* user_data) {
        self(user_data).endpoint_.remove_cid(*cid);
        return 0;
    }
    static int update_key(ngtcp2_conn* conn, uint8_t* rx_secret, uint8_t* tx_secret,
                          ngtcp2_crypto_aead_ctx* rx_aead_ctx, uint8_t* rx_iv,
                          ngtcp2_crypto_aead_ctx* tx_aead_ctx, uint8_t* tx_iv,
                          const uint8_t* current_rx_secret, const uint8_t* current_tx_secret,
                          size_t secret_length, void*) {
        std::array<uint8_t, 64> rx_key, tx_key;
        if (ngtcp2_crypto_update_key(conn, rx_secret, tx_secret, rx_aead_ctx, rx_key.data(), rx_iv,
                                     tx_aead_ctx, tx_key.data(), tx_iv, current_rx_secret,
                                     current_tx_secret, secret_length) != 0)
            return NGTCP2_ERR_CALLBACK_FAILURE;
        return 0;
    }
    // The 1-RTT keys: the server may send application data from here on (RFC 9001 §4.1.1).
    static int recv_tx_key(ngtcp2_conn*, ngtcp2_crypto_level level, void* user_data) {
        if (level != NGTCP2_CRYPTO_LEVEL_APPLICATION) return 0;
        QuicConnection& c = self(user_data);
        if (!c.application_ || c.application_started_) return 0;
        c.application_started_ = true;
        return c.application_->start() ? 0 : NGTCP2_ERR_CALLBACK_FAILURE;
    }
    static int handshake_completed(ngtcp2_conn*, void* user_data) {
        QuicConnection& c = self(user_data);
        if (c.handshaking_) c.endpoint_.handshake_ended();
        c.handshaking_ = false;
        return 0;
    }
    static ngtcp2_conn* get_conn(ngtcp2_crypto_conn_ref* ref) {
        return static_cast<QuicConnection*>(ref->user_data)->conn_;
    }
};

QuicConnection::QuicConnection(QuicEndpoint& endpoint, const SocketAddress& local,
                               const SocketAddress& peer)
    : endpoint_(endpoint), local_(local), peer_(peer), timer_(this, &QuicConnection::on_timer) {}

QuicConnection::~QuicConnection() {
    endpoint_.reactor().timers().cancel(timer_);
    if (conn_) {
        // Forget every ID the connection was known by.
        std::vector<ngtcp2_cid> ids(ngtcp2_conn_get_num_scid(conn_));
        ngtcp2_conn_get_scid(conn_, ids.data());
        for (const ngtcp2_cid& id : ids)
            endpoint_.remove_cid(id);
        if (initial_dcid_) endpoint_.remove_cid(*initial_dcid_);
        ngtcp2_conn_del(conn_);
    }
}

uint64_t QuicConnection::now_ns() {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return uint64_t(now.tv_sec) * 1'000'000'000 + uint64_t(now.tv_nsec);
}

int QuicConnection::fd() const {
    return endpoint_.fd();
}

bool QuicConnection::init(const ngtcp2_pkt_hd& initial, const ngtcp2_cid* retried,
                          std::string& why) {
    ngtcp2_callbacks callbacks{};
    callbacks.recv_client_initial = ngtcp2_crypto_recv_client_initial_cb;
    callbacks.recv_crypto_data = ngtcp2_crypto_recv_crypto_data_cb;
    callbacks.encrypt = ngtcp2_crypto_encrypt_cb;
    callbacks.decrypt = ngtcp2_crypto_decrypt_cb;
    callbacks.hp_mask = ngtcp2_crypto_hp_mask_cb;
    callbacks.recv_stream_data = QuicCallbacks::recv_stream_data;
    callbacks.acked_stream_data_offset = QuicCallbacks::acked_stream_data_offset;
    callbacks.stream_close = QuicCallbacks::stream_close;
    callbacks.rand = QuicCallbacks::rand;
    callbacks.get_new_connection_id = QuicCallbacks::get_new_connection_id;
    callbacks.remove_connection_id = QuicCallbacks::remove_connection_id;
    callbacks.update_key = QuicCallbacks::update_key;
    callbacks.stream_reset = QuicCallbacks::stream_reset;
    callbacks.extend_max_remote_streams_bidi = QuicCallbacks::extend_max_remote_streams_bidi;
    callbacks.extend_max_stream_data = QuicCallbacks::extend_max_stream_data;
    callbacks.delete_crypto_aead_ctx = ngtcp2_crypto_delete_crypto_aead_ctx_cb;
    callbacks.delete_crypto_cipher_ctx = ngtcp2_crypto_delete_crypto_cipher_ctx_cb;
    callbacks.get_path_challenge_data = ngtcp2_crypto_get_path_challenge_data_cb;
    callbacks.stream_stop_sending = QuicCallbacks::stream_stop_sending;
    callbacks.version_negotiation = ngtcp2_crypto_version_negotiation_cb;
    callbacks.recv_tx_key = QuicCallbacks::recv_tx_key;
    callbacks.handshake_completed = QuicCallbacks::handshake_completed;

    ngtcp2_settings settings;
    ngtcp2_settings_default(&settings);
    settings.initial_ts = now_ns();
    // Only a token we verified (a Retry's) spares the address validation.
    if (retried) settings.token = initial.token;
    settings.handshake_timeout = kHandshakeTimeoutMs * NGTCP2_MILLISECONDS;
    settings.max_window = 4 * kConnectionWindow;
    settings.max_stream_window = 4 * kStreamWindow;

    ngtcp2_transport_params params;
    ngtcp2_transport_params_default(&params);
    params.initial_max_stream_data_bidi_remote = kStreamWindow;
    params.initial_max_stream_data_uni = kStreamWindow;
    params.initial_max_data = kConnectionWindow;
    params.initial_max_streams_bidi = kMaxStreams;
    params.initial_max_streams_uni = 3; // RFC 9114 §6.2: control and the two QPACK streams
    params.max_idle_timeout = kIdleTimeoutMs * NGTCP2_MILLISECONDS;
    params.active_connection_id_limit = 7;
    params.stateless_reset_token_present = 1;
    gnutls_rnd(GNUTLS_RND_RANDOM, params.stateless_reset_token,
               sizeof params.stateless_reset_token);
    // RFC 9000 §7.3: the client's first DCID, and after a Retry the Retry's SCID.
    params.original_dcid = retried ? *retried : initial.dcid;
    if (retried) {
        params.retry_scid = initial.dcid;
        params.retry_scid_present = 1;
    }

    ngtcp2_cid scid;
    endpoint_.make_cid(scid);
    ngtcp2_path path = make_path(local_, peer_);
    int rv = ngtcp2_conn_server_new(&conn_, &initial.scid, &scid, &path, initial.version,
                                    &callbacks, &settings, &params, nullptr, this);
    if (rv != 0) {
        why = std::string("ngtcp2_conn_server_new: ") + ngtcp2_strerror(rv);
        return false;
    }
    conn_ref_ = std::make_unique<ConnRef>();
    conn_ref_->get_conn = QuicCallbacks::get_conn;
    conn_ref_->user_data = this;
    session_ = std::make_unique<QuicTlsSession>(endpoint_.tls().make_session(conn_ref_.get()));
    if (!*session_) {
        why = "cannot make a GnuTLS session";
        return false;
    }
    ngtcp2_conn_set_tls_native_handle(conn_, session_->get());
    endpoint_.add_cid(scid, this);
    initial_dcid_ = std::make_unique<ngtcp2_cid>(initial.dcid);
    endpoint_.add_cid(initial.dcid, this); // the client's Initials until it switches
    handshaking_ = true;
    endpoint_.handshake_started();
    return true;
}

void QuicConnection::receive(const SocketAddress& peer, const uint8_t* data, size_t size) {
    if (closed_) return;
    ngtcp2_path path = make_path(local_, peer);
    ngtcp2_pkt_info info{};
    // A backend's progress reported from inside the callbacks waits for drive() below.
    in_drive_ = true;
    int rv = ngtcp2_conn_read_pkt(conn_, &path, &info, data, size, now_ns());
    in_drive_ = false;
    if (rv != 0) {
        if (rv == NGTCP2_ERR_DRAINING || rv == NGTCP2_ERR_DROP_CONN) {
            close(); // the client closed (§10.2.2), or the packet cannot be answered
            return;
        }
        fail(rv, rv == NGTCP2_ERR_CRYPTO);
        return;
    }
    drive();
}

void QuicConnection::drive() {
    if (closed_) return;
    if (in_drive_) {
        again_ = true;
        return;
    }
    in_drive_ = true;
    do {
        again_ = false;
        if (application_ && application_started_) application_->poll();
        if (closed_ || !write_packets()) break;
    } while (again_ && !closed_);
    in_drive_ = false;
    if (closed_) return;
    // Stopping: the connection ends with its last stream (RFC 9114 §5.2).
    if (shutting_down_ && application_ && application_->idle()) return close_gracefully();
    arm_timer();
}

bool QuicConnection::write_packets() {
    std::array<QuicVec, 16> vec;
    // ngtcp2 sizes packets to the path's payload size; they are written in
    // place in the endpoint's send batch (a run of full-sized ones to one
    // address leaves as one GSO send).
    size_t limit =
        std::min(UdpSendBatch::kMaxDatagram, ngtcp2_conn_get_max_tx_udp_payload_size(conn_));
    uint8_t* packet = nullptr; // kept across NGTCP2_ERR_WRITE_MORE: a packet half built
    ngtcp2_path_storage path_storage;
    ngtcp2_path_storage_zero(&path_storage);
    uint64_t ts = now_ns();
    // Counted in packets sent, never in calls: after NGTCP2_ERR_WRITE_MORE a
    // packet is half built, and ngtcp2 asserts that the next call finishes it.
    for (int sent = 0;;) {
        if (!packet) packet = endpoint_.send_space();
        int64_t id = -1;
        bool fin = false;
        int64_t count = 0;
        if (application_ && application_started_ && ngtcp2_conn_get_max_data_left(conn_)) {
            count = application_->next_data(id, fin, vec.data(), vec.size());
            if (count < 0) {
                fail(NGTCP2_ERR_INTERNAL);
                return false;
            }
        }
        uint32_t flags = NGTCP2_WRITE_STREAM_FLAG_MORE | (fin ? NGTCP2_WRITE_STREAM_FLAG_FIN : 0);
        ngtcp2_ssize data_written = -1;
        ngtcp2_pkt_info info{};
        ngtcp2_ssize n = ngtcp2_conn_writev_stream(
            conn_, &path_storage.path, &info, packet, limit, &data_written, flags, id,
            reinterpret_cast<const ngtcp2_vec*>(vec.data()), size_t(count), ts);
        if (n < 0) {
            switch (n) {
            case NGTCP2_ERR_STREAM_DATA_BLOCKED:
                application_->stream_blocked(id);
                continue;
            case NGTCP2_ERR_STREAM_SHUT_WR:
                application_->stream_write_shut(id);
                continue;
            case NGTCP2_ERR_WRITE_MORE:
                if (application_->written(id, size_t(data_written)) != 0) {
                    fail(NGTCP2_ERR_INTERNAL);
                    return false;
                }
                continue;
            default:
                fail(int(n));
                return false;
            }
        }
        if (data_written >= 0 && application_->written(id, size_t(data_written)) != 0) {
            fail(NGTCP2_ERR_INTERNAL);
            return false;
        }
        if (n == 0) {
            ngtcp2_conn_update_pkt_tx_time(conn_, ts);
            return true; // nothing more now: congestion or flow control, or all sent
        }
        // ngtcp2 names the path of each packet: a migrating client (§9) is
        // answered at its new address once the path is validated.
        endpoint_.queue_send(to_address(path_storage.path.remote), size_t(n));
        packet = nullptr;
        if (++sent == kMaxPacketsPerPass) {
            // The pass budget is spent: the rest after the reactor's other work.
            ngtcp2_conn_update_pkt_tx_time(conn_, ts);
            endpoint_.wake(this);
            return true;
        }
    }
}

void QuicConnection::arm_timer() {
    uint64_t expiry = ngtcp2_conn_get_expiry(conn_);
    if (expiry == UINT64_MAX) {
        endpoint_.reactor().timers().cancel(timer_);
        return;
    }
    uint64_t now = now_ns();
    uint64_t wait_ms = expiry > now ? (expiry - now + 999'999) / 1'000'000 : 0;
    endpoint_.reactor().timers().schedule(timer_, endpoint_.reactor().now_ms() + wait_ms);
}

void QuicConnection::on_timer(TimerEntry& entry) {
    QuicConnection& self = OwnedTimerEntry<QuicConnection>::owner_of(entry);
    if (self.closed_) return;
    self.in_drive_ = true;
    int rv = ngtcp2_conn_handle_expiry(self.conn_, now_ns());
    self.in_drive_ = false;
    if (rv == NGTCP2_ERR_IDLE_CLOSE) {
        self.close(); // §10.1: an idle connection is closed silently
        return;
    }
    if (rv != 0) {
        self.fail(rv);
        return;
    }
    self.drive();
}

void QuicConnection::fail(int liberr, bool tls_alert) {
    if (closed_) return;
    ngtcp2_connection_close_error error;
    ngtcp2_connection_close_error_default(&error);
    if (tls_alert)
        ngtcp2_connection_close_error_set_transport_error_tls_alert(
            &error, ngtcp2_conn_get_tls_alert(conn_), nullptr, 0);
    else
        ngtcp2_connection_close_error_set_transport_error_liberr(&error, liberr, nullptr, 0);
    send_close(&error);
    log_info("client %s: QUIC: %s", peer_.to_string().c_str(), ngtcp2_strerror(liberr));
    close();
}

void QuicConnection::send_close(const void* close_error) {
    if (ngtcp2_conn_is_in_closing_period(conn_) || ngtcp2_conn_is_in_draining_period(conn_)) return;
    ngtcp2_path_storage path_storage;
    ngtcp2_path_storage_zero(&path_storage);
    ngtcp2_pkt_info info{};
    ngtcp2_ssize n = ngtcp2_conn_write_connection_close(
        conn_, &path_storage.path, &info, endpoint_.send_space(), UdpSendBatch::kMaxDatagram,
        static_cast<const ngtcp2_connection_close_error*>(close_error), now_ns());
    if (n > 0) endpoint_.queue_send(to_address(path_storage.path.remote), size_t(n));
}

void QuicConnection::close_gracefully() {
    if (closed_) return;
    ngtcp2_connection_close_error error;
    ngtcp2_connection_close_error_default(&error);
    if (application_)
        ngtcp2_connection_close_error_set_application_error(&error, application_->no_error_code(),
                                                            nullptr, 0);
    send_close(&error);
    close();
}

void QuicConnection::shutdown() {
    if (closed_ || !application_) return;
    shutting_down_ = true;
    application_->shutdown();
    drive(); // the GOAWAY leaves; an idle connection then closes
}

void QuicConnection::close() {
    if (closed_) return;
    closed_ = true;
    count_losses_of_open_streams();
    endpoint_.reactor().timers().cancel(timer_);
    if (handshaking_) endpoint_.handshake_ended();
    handshaking_ = false;
    if (application_) application_->close();
    endpoint_.retire(this);
}

bool QuicConnection::open_uni_stream(int64_t& id) {
    if (ngtcp2_conn_open_uni_stream(conn_, &id, nullptr) != 0) return false;
    highest_stream_ = std::max(highest_stream_, id);
    return true;
}

// A stream's losses are counted when it closes (stream_close); the streams
// still open when the connection ends (a client that closed before its last
// ACKs arrived, the HTTP/3 control streams) are counted here. ngtcp2 forgets
// a closed stream, so none is counted twice. The streams the server sends
// on are asked up to the highest ID seen (RFC 9000 §2.1: client-initiated
// bidirectional ones end in 0b00, server-initiated unidirectional in 0b11):
// a map lookup each, once per connection.
void QuicConnection::count_losses_of_open_streams() {
    if (!conn_) return;
    uint64_t lost = 0;
    for (int64_t first : {0, 3})
        for (int64_t id = first; id <= highest_stream_; id += 4)
            lost += ngtcp2_conn_get_stream_loss_count(conn_, id);
    if (lost) QuicGauges::bump(endpoint_.gauges().packets_lost, lost);
}

void QuicConnection::extend_stream_offset(int64_t id, uint64_t bytes) {
    if (bytes == 0) return;
    ngtcp2_conn_extend_max_stream_offset(conn_, id, bytes);
    ngtcp2_conn_extend_max_offset(conn_, bytes);
}

void QuicConnection::shutdown_stream_read(int64_t id, uint64_t app_error) {
    ngtcp2_conn_shutdown_stream_read(conn_, id, app_error);
}

void QuicConnection::shutdown_stream_write(int64_t id, uint64_t app_error) {
    ngtcp2_conn_shutdown_stream_write(conn_, id, app_error);
}

void QuicConnection::allow_one_more_stream() {
    ngtcp2_conn_extend_max_streams_bidi(conn_, 1);
}

uint64_t QuicConnection::max_local_streams_uni() const {
    return ngtcp2_conn_get_max_local_streams_uni(conn_);
}

uint64_t QuicConnection::initial_client_streams() const {
    return ngtcp2_conn_get_local_transport_params(conn_)->initial_max_streams_bidi;
}

} // namespace lepus
