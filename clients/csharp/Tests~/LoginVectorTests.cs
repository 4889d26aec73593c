// The WebSocket login's proof of possession (PROTOCOL.md, "Login: proof of possession")
// against the golden vectors the Rust server checks too (crates/proto/tests/vectors/stream_login.json).
using Tickwire.Protocol;

namespace Tickwire.Tests
{
    static class LoginVectorTests
    {
        [Test]
        public static void The_login_is_the_token_and_the_proof_of_every_golden_vector()
        {
            var file = Repo.Json("crates", "proto", "tests", "vectors", "stream_login.json");
            int checkedCount = 0;
            foreach (var vector in file["vectors"].Items)
            {
                var token = new ConnectToken
                {
                    Raw = Hex.Decode(vector["token"].AsString()),
                    ClientToServerKey = Hex.Decode(vector["client_to_server_key"].AsString()),
                };
                var nonce = Hex.Decode(vector["server_nonce"].AsString());
                var login = WebSocketLink.LoginMessage(token, nonce, 0);
                Assert.Equal(2080, login.Length, "token and proof");
                Assert.Equal(vector["token"].AsString(), Hex.Encode(login, 0, 2048), "the token, verbatim");
                Assert.Equal(vector["proof"].AsString(), Hex.Encode(login, 2048, 32), vector["name"].AsString());
                checkedCount++;
            }
            Assert.Equal(2, checkedCount, "vectors checked");
        }
    }
}
