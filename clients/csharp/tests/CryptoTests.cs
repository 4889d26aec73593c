// ChaCha20-Poly1305 against RFC 8439: the ChaCha20 encryption of 2.4.2, every Poly1305 vector
// of 2.5.2 and A.3 (tests/vectors/poly1305_rfc8439.txt), and the AEAD of 2.8.2.
using System;
using System.IO;
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

        [Test]
        public static void Poly1305_gives_every_rfc_8439_tag()
        {
            string key = null, input = null;
            int checkedCount = 0;
            foreach (var line in File.ReadAllLines(Path.Combine(Repo.Root, "clients", "csharp", "tests", "vectors", "poly1305_rfc8439.txt")))
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
