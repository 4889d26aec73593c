// ChaCha20-Poly1305 against RFC 8439: the block function of A.1, the ChaCha20 encryptions of
// 2.4.2 and A.2, every Poly1305 vector of 2.5.2 and A.3 (Tests~/vectors/poly1305_rfc8439.txt),
// the AEAD of 2.8.2 and A.5; and against the server's Rust (tickwire-aead, held to ring) for
// every plaintext length to a full datagram (Tests~/vectors/chacha20poly1305_lengths.txt).
using System;
using System.IO;
using System.Security.Cryptography;
using System.Text;
using Tickwire.Crypto;

namespace Tickwire.Tests
{
    static class CryptoTests
    {
        const string Sunscreen = "Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, sunscreen would be it.";

        [Test]
        public static void ChaCha20_encrypts_the_rfc_8439_section_2_4_2_plaintext()
        {
            var cipher = new ChaCha20Poly1305(Hex.Decode("000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"));
            var data = Encoding.ASCII.GetBytes(Sunscreen);
            cipher.ChaCha20(Hex.Decode("000000000000004a00000000"), 1, data, 0, data.Length);
            Assert.Equal(
                "6e2e359a2568f98041ba0728dd0d6981e97e7aec1d4360c20a27afccfd9fae0bf91b65c5524733ab8f593dabcd62b357" +
                "1639d624e65152ab8f530c359f0861d807ca0dbf500d6a6156a38e088a22b65e52bc514d16ccf806818ce91ab7793736" +
                "5af90bbf74a35be6b40b8eedf2785e42874d", Hex.Encode(data), "ciphertext");
        }

        const string IetfSubmission =
            "Any submission to the IETF intended by the Contributor for publication as all or part of an IETF " +
            "Internet-Draft or RFC and any statement made within the context of an IETF activity is considered " +
            "an \"IETF Contribution\". Such statements include oral statements in IETF sessions, as well as " +
            "written and electronic communications made at any time or place, which are addressed to";
        const string Jabberwocky =
            "'Twas brillig, and the slithy toves\nDid gyre and gimble in the wabe:\n" +
            "All mimsy were the borogoves,\nAnd the mome raths outgrabe.";

        /// <summary>ChaCha20 of <paramref name="plain"/> from <paramref name="counter"/> on, as hex.</summary>
        static string ChaCha20Hex(string key, string nonce, uint counter, byte[] plain)
        {
            var data = (byte[])plain.Clone();
            new ChaCha20Poly1305(Hex.Decode(key)).ChaCha20(Hex.Decode(nonce), counter, data, 0, data.Length);
            return Hex.Encode(data);
        }

        [Test]
        public static void ChaCha20_computes_the_rfc_8439_a_1_blocks()
        {
            string zero = new string('0', 64), zeroNonce = new string('0', 24);
            var vectors = new[]
            {
                new { Key = zero, Nonce = zeroNonce, Counter = 0u, Block =
                    "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7" +
                    "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586" },
                new { Key = zero, Nonce = zeroNonce, Counter = 1u, Block =
                    "9f07e7be5551387a98ba977c732d080dcb0f29a048e3656912c6533e32ee7aed" +
                    "29b721769ce64e43d57133b074d839d531ed1f28510afb45ace10a1f4b794d6f" },
                new { Key = new string('0', 62) + "01", Nonce = zeroNonce, Counter = 1u, Block =
                    "3aeb5224ecf849929b9d828db1ced4dd832025e8018b8160b82284f3c949aa5a" +
                    "8eca00bbb4a73bdad192b5c42f73f2fd4e273644c8b36125a64addeb006c13a0" },
                new { Key = "00ff" + new string('0', 60), Nonce = zeroNonce, Counter = 2u, Block =
                    "72d54dfbf12ec44b362692df94137f328fea8da73990265ec1bbbea1ae9af0ca" +
                    "13b25aa26cb4a648cb9b9d1be65b2c0924a66c54d545ec1b7374f4872e99f096" },
                new { Key = zero, Nonce = new string('0', 22) + "02", Counter = 0u, Block =
                    "c2c64d378cd536374ae204b9ef933fcd1a8b2288b3dfa49672ab765b54ee27c7" +
                    "8a970e0e955c14f3a88e741b97c286f75f8fc299e8148362fa198a39531bed6d" },
            };
            for (int i = 0; i < vectors.Length; i++)
            {
                var v = vectors[i];
                // A block is the keystream: ChaCha20 of 64 zero bytes.
                Assert.Equal(v.Block, ChaCha20Hex(v.Key, v.Nonce, v.Counter, new byte[64]), "A.1 vector " + (i + 1));
            }
        }

        [Test]
        public static void ChaCha20_encrypts_the_rfc_8439_a_2_plaintexts()
        {
            Assert.Equal(
                "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7" +
                "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586",
                ChaCha20Hex(new string('0', 64), new string('0', 24), 0, new byte[64]), "A.2 vector 1");
            Assert.Equal(375, IetfSubmission.Length, "the IETF text as the RFC has it");
            Assert.Equal(
                "a3fbf07df3fa2fde4f376ca23e82737041605d9f4f4f57bd8cff2c1d4b7955ec" +
                "2a97948bd3722915c8f3d337f7d370050e9e96d647b7c39f56e031ca5eb6250d" +
                "4042e02785ececfa4b4bb5e8ead0440e20b6e8db09d881a7c6132f420e527950" +
                "42bdfa7773d8a9051447b3291ce1411c680465552aa6c405b7764d5e87bea85a" +
                "d00f8449ed8f72d0d662ab052691ca66424bc86d2df80ea41f43abf937d3259d" +
                "c4b2d0dfb48a6c9139ddd7f76966e928e635553ba76c5c879d7b35d49eb2e62b" +
                "0871cdac638939e25e8a1e0ef9d5280fa8ca328b351c3c765989cbcf3daa8b6c" +
                "cc3aaf9f3979c92b3720fc88dc95ed84a1be059c6499b9fda236e7e818b04b0b" +
                "c39c1e876b193bfe5569753f88128cc08aaa9b63d1a16f80ef2554d7189c411f" +
                "5869ca52c5b83fa36ff216b9c1d30062bebcfd2dc5bce0911934fda79a86f6e6" +
                "98ced759c3ff9b6477338f3da4f9cd8514ea9982ccafb341b2384dd902f3d1ab" +
                "7ac61dd29c6f21ba5b862f3730e37cfdc4fd806c22f221",
                ChaCha20Hex(new string('0', 62) + "01", new string('0', 22) + "02", 1, Encoding.ASCII.GetBytes(IetfSubmission)),
                "A.2 vector 2");
            Assert.Equal(127, Jabberwocky.Length, "the poem as the RFC has it");
            Assert.Equal(
                "62e6347f95ed87a45ffae7426f27a1df5fb69110044c0d73118effa95b01e5cf" +
                "166d3df2d721caf9b21e5fb14c616871fd84c54f9d65b283196c7fe4f60553eb" +
                "f39c6402c42234e32a356b3e764312a61a5532055716ead6962568f87d3f3f77" +
                "04c6a8d1bcd1bf4d50d6154b6da731b187b58dfd728afa36757a797ac188d1",
                ChaCha20Hex("1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0", new string('0', 22) + "02", 42,
                    Encoding.ASCII.GetBytes(Jabberwocky)),
                "A.2 vector 3");
        }

        [Test]
        public static void Poly1305_gives_every_rfc_8439_tag()
        {
            string key = null, input = null;
            int checkedCount = 0;
            foreach (var line in File.ReadAllLines(Path.Combine(Repo.Root, "clients", "csharp", "Tests~", "vectors", "poly1305_rfc8439.txt")))
            {
                if (line.StartsWith("Key = ", StringComparison.Ordinal)) key = line.Substring(6);
                else if (line.StartsWith("Input = ", StringComparison.Ordinal)) input = line.Substring(8);
                else if (line.StartsWith("MAC = ", StringComparison.Ordinal))
                {
                    byte[] message = input.StartsWith("\"", StringComparison.Ordinal)
                        ? Encoding.ASCII.GetBytes(input.Substring(1, input.Length - 2))
                        : Hex.Decode(input);
                    Assert.Equal(line.Substring(6), Hex.Encode(Poly1305.Mac(Hex.Decode(key), message)), "tag for key " + key);
                    checkedCount++;
                }
            }
            Assert.Equal(12, checkedCount, "Poly1305 vectors checked");
        }

        static readonly byte[] AeadKey = Hex.Decode("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f");
        static readonly byte[] AeadNonce = Hex.Decode("070000004041424344454647");
        static readonly byte[] AeadAad = Hex.Decode("50515253c0c1c2c3c4c5c6c7");
        const string AeadSealed =
            "d31a8d34648e60db7b86afbc53ef7ec2a4aded51296e08fea9e2b5a736ee62d63dbea45e8ca9671282fafb69da92728b" +
            "1a71de0a9e060b2905d6a5b67ecd3b3692ddbd7f2d778b8c9803aee328091b58fab324e4fad675945585808b4831d7bc" +
            "3ff4def08e4b7a9de576d26586cec64b6116" + "1ae10b594f09e26a7e902ecbd0600691";

        [Test]
        public static void The_aead_seals_and_opens_the_rfc_8439_section_2_8_2_vector()
        {
            var aead = new ChaCha20Poly1305(AeadKey);
            var plain = Encoding.ASCII.GetBytes(Sunscreen);
            var sealedBytes = new byte[plain.Length + 16];
            aead.Seal(AeadNonce, AeadAad, 0, AeadAad.Length, plain, 0, plain.Length, sealedBytes, 0);
            Assert.Equal(AeadSealed, Hex.Encode(sealedBytes), "ciphertext and tag");

            var opened = new byte[plain.Length];
            Assert.True(aead.Open(AeadNonce, AeadAad, 0, AeadAad.Length, sealedBytes, 0, sealedBytes.Length, opened, 0), "the vector opens");
            Assert.Equal(Sunscreen, Encoding.ASCII.GetString(opened), "plaintext");
        }

        [Test]
        public static void The_aead_opens_and_seals_the_rfc_8439_a_5_vector()
        {
            var aead = new ChaCha20Poly1305(Hex.Decode("1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0"));
            var nonce = Hex.Decode("000000000102030405060708");
            var aad = Hex.Decode("f33388860000000000004e91");
            var sealedBytes = Hex.Decode(
                "64a0861575861af460f062c79be643bd5e805cfd345cf389f108670ac76c8cb2" +
                "4c6cfc18755d43eea09ee94e382d26b0bdb7b73c321b0100d4f03b7f355894cf" +
                "332f830e710b97ce98c8a84abd0b948114ad176e008d33bd60f982b1ff37c855" +
                "9797a06ef4f0ef61c186324e2b3506383606907b6a7c02b0f9f6157b53c867e4" +
                "b9166c767b804d46a59b5216cde7a4e99040c5a40433225ee282a1b0a06c523e" +
                "af4534d7f83fa1155b0047718cbc546a0d072b04b3564eea1b422273f548271a" +
                "0bb2316053fa76991955ebd63159434ecebb4e466dae5a1073a6727627097a10" +
                "49e617d91d361094fa68f0ff77987130305beaba2eda04df997b714d6c6f2c29" +
                "a6ad5cb4022b02709b" + "eead9d67890cbb22392336fea1851f38");
            const string plaintext =
                "496e7465726e65742d4472616674732061726520647261667420646f63756d65" +
                "6e74732076616c696420666f722061206d6178696d756d206f6620736978206d" +
                "6f6e74687320616e64206d617920626520757064617465642c207265706c6163" +
                "65642c206f72206f62736f6c65746564206279206f7468657220646f63756d65" +
                "6e747320617420616e792074696d652e20497420697320696e617070726f7072" +
                "6961746520746f2075736520496e7465726e65742d4472616674732061732072" +
                "65666572656e6365206d6174657269616c206f7220746f206369746520746865" +
                "6d206f74686572207468616e206173202fe2809c776f726b20696e2070726f67" +
                "726573732e2fe2809d";
            var opened = new byte[sealedBytes.Length - 16];
            Assert.True(aead.Open(nonce, aad, 0, aad.Length, sealedBytes, 0, sealedBytes.Length, opened, 0), "the A.5 vector opens");
            Assert.Equal(plaintext, Hex.Encode(opened), "A.5 plaintext");
            var resealed = new byte[sealedBytes.Length];
            aead.Seal(nonce, aad, 0, aad.Length, opened, 0, opened.Length, resealed, 0);
            Assert.Equal(Hex.Encode(sealedBytes), Hex.Encode(resealed), "A.5 ciphertext and tag, sealed again");
        }

        /// <summary>
        /// The bytes SplitMix64 seeded with a length gives, each output little-endian: the inputs
        /// of the length sweep (the header of chacha20poly1305_lengths.txt).
        /// </summary>
        sealed class SweepBytes
        {
            ulong _state, _word;
            int _used = 8;

            public SweepBytes(ulong seed) { _state = seed; }

            public byte[] Take(int count)
            {
                var bytes = new byte[count];
                for (int i = 0; i < count; i++)
                {
                    if (_used == 8)
                    {
                        _state += 0x9e3779b97f4a7c15UL;
                        ulong z = _state;
                        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9UL;
                        z = (z ^ (z >> 27)) * 0x94d049bb133111ebUL;
                        _word = z ^ (z >> 31);
                        _used = 0;
                    }
                    bytes[i] = (byte)(_word >> (8 * _used++));
                }
                return bytes;
            }
        }

        [Test]
        public static void Every_length_to_a_full_datagram_seals_as_the_server_does()
        {
            string path = Path.Combine(Repo.Root, "clients", "csharp", "Tests~", "vectors", "chacha20poly1305_lengths.txt");
            var ciphertexts = SHA256.Create();
            int next = 0;
            string digest = null;
            foreach (var line in File.ReadAllLines(path))
            {
                if (line.Length == 0 || line[0] == '#') continue;
                var fields = line.Split(' ');
                if (fields[0] == "ciphertexts-sha256") { digest = fields[1]; continue; }
                int length = int.Parse(fields[0], System.Globalization.CultureInfo.InvariantCulture);
                Assert.Equal(next, length, "the next length in the file");
                var stream = new SweepBytes((ulong)length);
                var aead = new ChaCha20Poly1305(stream.Take(32));
                var nonce = stream.Take(12);
                var aad = stream.Take(length % 29);
                var plain = stream.Take(length);
                var sealedBytes = new byte[length + 16];
                aead.Seal(nonce, aad, 0, aad.Length, plain, 0, length, sealedBytes, 0);
                Assert.Equal(fields[1], Hex.Encode(sealedBytes, length, 16), "tag for " + length + " bytes");
                ciphertexts.TransformBlock(sealedBytes, 0, length, null, 0);
                var opened = new byte[length];
                Assert.True(aead.Open(nonce, aad, 0, aad.Length, sealedBytes, 0, sealedBytes.Length, opened, 0), length + " bytes open");
                Assert.True(Hex.Encode(opened) == Hex.Encode(plain), length + " bytes open to the plaintext");
                next++;
            }
            Assert.Equal(1473, next, "lengths checked (0 to 1472)");
            ciphertexts.TransformFinalBlock(new byte[0], 0, 0);
            Assert.Equal(digest, Hex.Encode(ciphertexts.Hash), "SHA-256 of every ciphertext");
        }

        [Test]
        public static void A_flipped_bit_anywhere_is_refused_and_nothing_is_written()
        {
            var aead = new ChaCha20Poly1305(AeadKey);
            var sealedBytes = Hex.Decode(AeadSealed);
            var output = new byte[sealedBytes.Length];
            for (int i = 0; i < sealedBytes.Length; i += 7)
            {
                sealedBytes[i] ^= 0x10;
                Assert.True(!aead.Open(AeadNonce, AeadAad, 0, AeadAad.Length, sealedBytes, 0, sealedBytes.Length, output, 0),
                    "a flip at byte " + i + " was accepted");
                sealedBytes[i] ^= 0x10;
            }
            var aad = (byte[])AeadAad.Clone();
            aad[3] ^= 1;
            Assert.True(!aead.Open(AeadNonce, aad, 0, aad.Length, sealedBytes, 0, sealedBytes.Length, output, 0), "altered associated data was accepted");
            Assert.True(Array.TrueForAll(output, b => b == 0), "a refused packet wrote plaintext");
        }

        [Test]
        public static void Sealing_in_place_and_opening_in_place_round_trip_every_length_without_allocating()
        {
            var aead = new ChaCha20Poly1305(AeadKey);
            var buffer = new byte[300 + 16];
            for (int length = 0; length <= 300; length += 13)
            {
                for (int i = 0; i < length; i++) buffer[i] = (byte)(i * 7 + length);
                aead.Seal(aead.SequenceNonce((ulong)length), AeadAad, 0, 12, buffer, 0, length, buffer, 0);
                Assert.True(aead.Open(aead.SequenceNonce((ulong)length), AeadAad, 0, 12, buffer, 0, length + 16, buffer, 0), "length " + length + " opens");
                for (int i = 0; i < length; i++) Assert.True(buffer[i] == (byte)(i * 7 + length), "length " + length + " byte " + i);
            }
            long allocated = Alloc.Measure(() =>
            {
                aead.Seal(aead.SequenceNonce(9), AeadAad, 0, 12, buffer, 0, 200, buffer, 0);
                aead.Open(aead.SequenceNonce(9), AeadAad, 0, 12, buffer, 0, 216, buffer, 0);
            }, 100);
            Assert.Equal(0L, allocated, "bytes allocated by 100 seal/open pairs");
        }
    }
}
