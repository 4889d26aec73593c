// The UDP client endpoint, sans-IO, against a scripted server holding the token's keys: the
// handshake's packets byte for byte, the replay window, unauthenticated packets, a denial, a
// disconnect from the server, and the handshake timeout. Times are virtual microseconds.
using System;
using Tickwire.Crypto;
using Tickwire.Protocol;

namespace Tickwire.Tests
{
    static class UdpConnectionTests
    {
        const ulong ProtocolId = 0x1122334455667788;

        /// A token with recognisable fields and keys the scripted server knows.
        static ConnectToken Token(out byte[] clientToServer, out byte[] serverToClient)
        {
            var raw = new byte[ConnectToken.Bytes];
            Buffer.BlockCopy(ConnectToken.VersionInfo, 0, raw, 0, 13);
            for (int i = 0; i < 8; i++) raw[13 + i] = (byte)(ProtocolId >> (8 * i));
            ulong expires = 2000000000;
            for (int i = 0; i < 8; i++) raw[29 + i] = (byte)(expires >> (8 * i));
            for (int i = 37; i < 1073; i++) raw[i] = (byte)(i * 13); // nonce and sealed private token
            raw[1073] = 2; // timeout_seconds
            raw[1077] = 1;
            raw[1078] = 1; raw[1079] = 127; raw[1082] = 1; raw[1083] = 0x61; raw[1084] = 0x1e; // 127.0.0.1:7777
            clientToServer = new byte[32];
            serverToClient = new byte[32];
            for (int i = 0; i < 32; i++) { clientToServer[i] = (byte)(i + 1); serverToClient[i] = (byte)(200 - i); }
            Buffer.BlockCopy(clientToServer, 0, raw, 1085, 32);
            Buffer.BlockCopy(serverToClient, 0, raw, 1117, 32);
            return ConnectToken.Read(raw);
        }

        /// A packet from the server: prefix, sequence bytes, body sealed with the server-to-client key.
        static byte[] Seal(byte[] key, int type, ulong sequence, byte[] body)
        {
            int sequenceLength = 1;
            while (sequenceLength < 8 && (sequence >> (8 * sequenceLength)) != 0) sequenceLength++;
            var packet = new byte[1 + sequenceLength + body.Length + 16];
            packet[0] = (byte)(sequenceLength << 4 | type);
            for (int i = 0; i < sequenceLength; i++) packet[1 + i] = (byte)(sequence >> (8 * i));
            var aad = new byte[22];
            Buffer.BlockCopy(ConnectToken.VersionInfo, 0, aad, 0, 13);
            for (int i = 0; i < 8; i++) aad[13 + i] = (byte)(ProtocolId >> (8 * i));
            aad[21] = packet[0];
            var aead = new ChaCha20Poly1305(key);
            aead.Seal(aead.SequenceNonce(sequence), aad, 0, 22, body, 0, body.Length, packet, 1 + sequenceLength);
            return packet;
        }

        static byte[] Open(byte[] key, byte[] packet, int length, out int type, out ulong sequence)
        {
            type = packet[0] & 0x0f;
            int sequenceLength = packet[0] >> 4;
            sequence = 0;
            for (int i = 0; i < sequenceLength; i++) sequence |= (ulong)packet[1 + i] << (8 * i);
            var aad = new byte[22];
            Buffer.BlockCopy(ConnectToken.VersionInfo, 0, aad, 0, 13);
            for (int i = 0; i < 8; i++) aad[13 + i] = (byte)(ProtocolId >> (8 * i));
            aad[21] = packet[0];
            var aead = new ChaCha20Poly1305(key);
            var body = new byte[length - 1 - sequenceLength - 16];
            Assert.True(aead.Open(aead.SequenceNonce(sequence), aad, 0, 22, packet, 1 + sequenceLength, length - 1 - sequenceLength, body, 0),
                "the client's packet authenticates with the client-to-server key");
            return body;
        }

        /// The handshake half of the sequence space: challenges and denials only.
        const ulong Handshake = 1UL << 63;

        static readonly byte[] DefaultParams = Hex.Decode("3c64001027000" + "0b00400000400030001" + "02");

        static UdpConnection Connected(Inbox inbox, out byte[] c2s, out byte[] s2c)
        {
            var token = Token(out c2s, out s2c);
            var client = new UdpConnection(token, 0, 1000, inbox);
            var buffer = new byte[2048];
            Assert.Equal(1066, client.PollTransmit(0, buffer), "request length");
            var challengeBody = new byte[384];
            for (int i = 0; i < challengeBody.Length; i++) challengeBody[i] = (byte)i;
            var challenge = Seal(s2c, 2, Handshake | 42, challengeBody);
            client.HandleDatagram(1000, challenge, challenge.Length);
            Assert.Equal(409, client.PollTransmit(1000, buffer), "response length");
            var accepted = Seal(s2c, 4, 0, DefaultParams);
            client.HandleDatagram(2000, accepted, accepted.Length);
            Assert.Equal(ConnectionState.Connected, client.State, "state after accepted");
            return client;
        }

        [Test]
        public static void The_handshake_sends_the_request_and_response_the_protocol_specifies()
        {
            byte[] c2s, s2c;
            var token = Token(out c2s, out s2c);
            var inbox = new Inbox();
            var client = new UdpConnection(token, 0, 1000, inbox);
            var buffer = new byte[2048];
            Assert.Equal(1066, client.PollTransmit(0, buffer), "request length");
            Assert.Equal("00" + Hex.Encode(ConnectToken.VersionInfo) + "8877665544332211" + "0094357700000000",
                Hex.Encode(buffer, 0, 30), "request header: prefix, VERSION_INFO, protocol id, expiry");
            Assert.Equal(Hex.Encode(token.Raw, 37, 1036), Hex.Encode(buffer, 30, 1036), "the nonce and sealed private token, verbatim");
            Assert.Equal(0, client.PollTransmit(50000, buffer), "no resend before 100 ms");
            Assert.Equal(1066, client.PollTransmit(100000, buffer), "resent after 100 ms");

            var wrongKey = Seal(c2s, 2, Handshake | 42, new byte[384]);
            client.HandleDatagram(100000, wrongKey, wrongKey.Length);
            Assert.Equal(1066, client.PollTransmit(200000, buffer), "a challenge under the wrong key is ignored");

            var challengeBody = new byte[384];
            for (int i = 0; i < 384; i++) challengeBody[i] = (byte)i;
            var outOfHalf = Seal(s2c, 2, 42, challengeBody);
            client.HandleDatagram(200000, outOfHalf, outOfHalf.Length);
            Assert.Equal(1066, client.PollTransmit(300000, buffer), "a challenge outside the handshake half is ignored");

            var challenge = Seal(s2c, 2, Handshake | 42, challengeBody);
            client.HandleDatagram(300000, challenge, challenge.Length);
            Assert.Equal(409, client.PollTransmit(300000, buffer), "response length");
            Assert.Equal("83" + "2a00000000000080", Hex.Encode(buffer, 0, 9), "an encrypted response header: 8 sequence bytes, the challenge's sequence");
            int responseType; ulong responseSequence;
            var echoed = Open(c2s, buffer, 409, out responseType, out responseSequence);
            Assert.Equal(Hex.Encode(challengeBody), Hex.Encode(echoed), "the response carries the challenge token, sealed under the client-to-server key");
            var first = Hex.Encode(buffer, 0, 409);
            Assert.Equal(409, client.PollTransmit(400000, buffer), "resent after 100 ms");
            Assert.Equal(first, Hex.Encode(buffer, 0, 409), "the same sealed bytes, not a second sealing");

            var newer = Seal(s2c, 2, Handshake | 43, challengeBody);
            client.HandleDatagram(400000, newer, newer.Length);
            Assert.Equal(409, client.PollTransmit(500000, buffer), "a newer challenge is answered");
            Assert.Equal("2b00000000000080", Hex.Encode(buffer, 1, 8), "with its own sequence");

            var accepted = Seal(s2c, 4, 0, DefaultParams);
            client.HandleDatagram(500000, accepted, accepted.Length);
            Assert.Equal(ConnectionState.Connected, client.State, "connected");
            Assert.Equal(1200, client.Params.Mtu, "the MTU the server dictated");
            InboxKind kind; byte code; ArraySegment<byte> message;
            Assert.True(inbox.TryTake(out kind, out code, out message) && kind == InboxKind.Connected, "a Connected signal");

            // The first payload: sequence 0 in the header, encrypted under the client-to-server key.
            Assert.Equal(SendResult.Ok, client.Send(0, new byte[] { 0x68, 0x69 }, 0, 2), "send");
            int length = client.PollTransmit(300000, buffer);
            int type; ulong sequence;
            var body = Open(c2s, buffer, length, out type, out sequence);
            Assert.Equal(5, type, "payload type");
            Assert.Equal(0UL, sequence, "the client's first packet sequence");
            Assert.Equal("000000000000000000" + "0000000268" + "69", Hex.Encode(body), "reliability payload: no ack yet, message id 0");
        }

        [Test]
        public static void The_client_answers_the_golden_challenge_with_the_golden_response()
        {
            // crates/proto/tests/vectors/udp_handshake.json: the same keys and protocol id as Token().
            var vector = Repo.Json("crates", "proto", "tests", "vectors", "udp_handshake.json");
            byte[] c2s, s2c;
            var token = Token(out c2s, out s2c);
            Assert.Equal(vector["client_to_server_key"].AsString(), Hex.Encode(c2s), "the vector's client-to-server key");
            Assert.Equal(vector["server_to_client_key"].AsString(), Hex.Encode(s2c), "the vector's server-to-client key");
            var client = new UdpConnection(token, 0, 1000, new Inbox());
            var buffer = new byte[2048];
            Assert.Equal(1066, client.PollTransmit(0, buffer), "request length");
            var challenge = Hex.Decode(vector["challenge_packet"].AsString());
            client.HandleDatagram(1000, challenge, challenge.Length);
            int length = client.PollTransmit(1000, buffer);
            Assert.Equal(vector["response_packet"].AsString(), Hex.Encode(buffer, 0, length), "the response, byte for byte");
        }

        [Test]
        public static void Replayed_and_forged_packets_are_dropped_and_a_disconnect_ends_the_connection()
        {
            var inbox = new Inbox();
            byte[] c2s, s2c;
            var client = Connected(inbox, out c2s, out s2c);
            InboxKind kind; byte code; ArraySegment<byte> message;
            while (inbox.TryTake(out kind, out code, out message)) { }

            var payload = Seal(s2c, 5, 1, Hex.Decode("000000000000000000" + "000000026869"));
            client.HandleDatagram(3000, payload, payload.Length);
            client.HandleDatagram(3000, payload, payload.Length);
            var tampered = Seal(s2c, 5, 2, Hex.Decode("000000000000000000" + "010000026869"));
            tampered[tampered.Length - 1] ^= 1;
            client.HandleDatagram(3000, tampered, tampered.Length);
            var wrongKey = Seal(c2s, 5, 3, Hex.Decode("000000000000000000"));
            client.HandleDatagram(3000, wrongKey, wrongKey.Length);
            Assert.True(inbox.TryTake(out kind, out code, out message) && kind == InboxKind.Message, "the message is delivered");
            Assert.Equal("6869", Hex.Encode(message.Array, message.Offset, message.Count), "its bytes");
            Assert.True(!inbox.TryTake(out kind, out code, out message), "the replayed packet delivered it again");
            Assert.Equal(2UL, client.PacketsUnauthenticated, "a tampered packet and one under the wrong key are counted");

            // A recorded challenge (handshake half, far ahead of the connection's sequences)
            // is dropped unopened: it must not move the replay window past the real packets.
            var recorded = Seal(s2c, 2, Handshake | 7, new byte[384]);
            client.HandleDatagram(3000, recorded, recorded.Length);
            var denial = Seal(s2c, 1, Handshake | 8, new byte[] { 7 });
            client.HandleDatagram(3000, denial, denial.Length);
            Assert.Equal(ConnectionState.Connected, client.State, "a recorded denial does not end the connection");
            var later = Seal(s2c, 5, 3, Hex.Decode("000100000000000000" + "000100026869"));
            client.HandleDatagram(3000, later, later.Length);
            Assert.True(inbox.TryTake(out kind, out code, out message) && kind == InboxKind.Message, "a genuine packet after the recorded challenge is taken in");

            var disconnect = Seal(s2c, 6, 4, new byte[] { 4 });
            client.HandleDatagram(4000, disconnect, disconnect.Length);
            Assert.Equal(ConnectionState.Disconnected, client.State, "state after the server's disconnect");
            Assert.Equal(DisconnectReason.Kicked, client.Reason, "reason");
            Assert.True(inbox.TryTake(out kind, out code, out message) && kind == InboxKind.Disconnected && code == 4, "a Disconnected(Kicked) signal");
        }

        [Test]
        public static void Leaving_sends_three_disconnect_packets_and_silence_times_out()
        {
            var inbox = new Inbox();
            byte[] c2s, s2c;
            var client = Connected(inbox, out c2s, out s2c);
            var buffer = new byte[2048];
            client.Disconnect(5000);
            for (int i = 0; i < 3; i++)
            {
                int length = client.PollTransmit(5000, buffer);
                int type; ulong sequence;
                var body = Open(c2s, buffer, length, out type, out sequence);
                Assert.Equal(6, type, "disconnect packet " + i);
                Assert.Equal("01", Hex.Encode(body), "reason requested");
            }
            Assert.Equal(0, client.PollTransmit(5000, buffer), "three disconnects, then nothing");

            var silent = Connected(new Inbox(), out c2s, out s2c);
            silent.HandleTimeout(2000 + 9999000);
            Assert.Equal(ConnectionState.Connected, silent.State, "still connected just before the 10 s timeout");
            silent.HandleTimeout(2000 + 10000000);
            Assert.Equal(DisconnectReason.TimedOut, silent.Reason, "timed out after 10 s of silence");
        }

        [Test]
        public static void A_denial_or_an_unanswered_handshake_ends_with_its_reason()
        {
            byte[] c2s, s2c;
            var denied = new UdpConnection(Token(out c2s, out s2c), 0, 1000, new Inbox());
            var packet = Seal(s2c, 1, Handshake, new byte[] { 7 });
            denied.HandleDatagram(0, packet, packet.Length);
            Assert.Equal(DisconnectReason.ServerFull, denied.Reason, "denied: server full");

            var unanswered = new UdpConnection(Token(out c2s, out s2c), 0, 1000, new Inbox());
            unanswered.HandleTimeout(1999999);
            Assert.Equal(ConnectionState.Connecting, unanswered.State, "still trying within timeout_seconds (2 s)");
            unanswered.HandleTimeout(2000000);
            Assert.Equal(DisconnectReason.HandshakeTimedOut, unanswered.Reason, "gave up after timeout_seconds");
        }
    }
}
