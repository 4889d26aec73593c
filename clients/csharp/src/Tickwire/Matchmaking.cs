// Matchmaking over HTTP: POST /api/matchmake (crates/proto/src/matchmake.rs), the seat and
// the connect token. The HTTP call goes through IHttpPost, so a WebGL build can use
// UnityWebRequest where HttpClient has no sockets.
using System;
using System.Globalization;
using System.Net.Http;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Tickwire.Protocol;

namespace Tickwire
{
    /// <summary>What to ask the matchmaker for (all optional; at least kind or room, or a session).</summary>
    public sealed class MatchmakeRequest
    {
        /// <summary>Join or create a room of this kind ("relay", "arena", ...).</summary>
        public string Kind;
        /// <summary>Join this room.</summary>
        public ulong? Room;
        /// <summary>Create a new room of Kind rather than join one.</summary>
        public bool Create;
        /// <summary>A guest's display name.</summary>
        public string Name;
        /// <summary>The session of an earlier answer: the same player again, with their seat if still held.</summary>
        public string Session;
        /// <summary>An identity signed by the game's backend (auth.mode = "shared_secret"), as its JSON object, or null.</summary>
        public string IdentityJson;

        /// <summary>The same request naming <paramref name="session"/> (what a reconnection sends).</summary>
        public MatchmakeRequest WithSession(string session)
        {
            var copy = (MatchmakeRequest)MemberwiseClone();
            copy.Session = session;
            return copy;
        }

        /// <summary>The request body: only the fields that are set.</summary>
        public string ToJson()
        {
            var sb = new StringBuilder("{");
            Action<string, string> add = (key, json) =>
            {
                if (sb.Length > 1) sb.Append(',');
                sb.Append(JsonValue.Quote(key)).Append(':').Append(json);
            };
            if (Kind != null) add("kind", JsonValue.Quote(Kind));
            if (Room.HasValue) add("room", Room.Value.ToString(CultureInfo.InvariantCulture));
            if (Create) add("create", "true");
            if (Name != null) add("name", JsonValue.Quote(Name));
            if (Session != null) add("session", JsonValue.Quote(Session));
            if (IdentityJson != null) add("identity", IdentityJson);
            return sb.Append('}').ToString();
        }
    }

    /// <summary>A seat: who the player is, where they sit, and the single-use token that lets them in.</summary>
    public sealed class MatchmakeAnswer
    {
        /// <summary>The player's id on this server.</summary>
        public ulong PlayerId;
        /// <summary>The name others see.</summary>
        public string Name;
        /// <summary>The room id.</summary>
        public ulong Room;
        /// <summary>The room's kind.</summary>
        public string Kind;
        /// <summary>True when this is the player's held seat coming back.</summary>
        public bool Reconnect;
        /// <summary>Give this back in the next request to be the same player.</summary>
        public string Session;
        /// <summary>The connect token: good for one connection over one transport.</summary>
        public ConnectToken Token;
        /// <summary>Unix seconds after which the token is refused.</summary>
        public ulong ExpiresAt;
        /// <summary>The UDP address ("host:port").</summary>
        public string UdpEndpoint;
        /// <summary>ws://host:port/ws.</summary>
        public string WsUrl;
        /// <summary>wss://host:port/ws when the server runs TLS itself, else null.</summary>
        public string WssUrl;

        /// <summary>Reads the API's JSON answer; a <see cref="MatchmakeException"/> (BadAnswer) otherwise.</summary>
        public static MatchmakeAnswer Parse(string body)
        {
            try
            {
                var json = JsonValue.Parse(body);
                var endpoints = Field(json, "endpoints");
                var wss = endpoints["wss"];
                return new MatchmakeAnswer
                {
                    PlayerId = Field(json, "player_id").AsULong(),
                    Name = Field(json, "name").AsString(),
                    Room = Field(json, "room").AsULong(),
                    Kind = Field(json, "kind").AsString(),
                    Reconnect = Field(json, "reconnect").Bool,
                    Session = Field(json, "session").AsString(),
                    Token = ConnectToken.Read(Convert.FromBase64String(Field(json, "token").AsString())),
                    ExpiresAt = Field(json, "expires_at").AsULong(),
                    UdpEndpoint = Field(endpoints, "udp").AsString(),
                    WsUrl = Field(endpoints, "ws").AsString(),
                    WssUrl = wss == null || wss.IsNull ? null : wss.AsString(),
                };
            }
            catch (Exception e) when (e is FormatException || e is OverflowException || e is ArgumentException)
            {
                throw new MatchmakeException(MatchmakeErrorKind.BadAnswer, 0, "matchmaking answer: " + e.Message);
            }
        }

        static JsonValue Field(JsonValue json, string key)
        {
            var value = json[key];
            if (value == null || value.IsNull) throw new FormatException("no " + key);
            return value;
        }
    }

    /// <summary>Why matchmaking failed.</summary>
    public enum MatchmakeErrorKind
    {
        /// <summary>400: the request was malformed.</summary>
        BadRequest,
        /// <summary>401: the identity or session does not verify.</summary>
        Unauthorized,
        /// <summary>404: no such room or kind, or no seat held for a session.</summary>
        NotFound,
        /// <summary>409: the room is full, or the player is placed elsewhere.</summary>
        RoomFull,
        /// <summary>429: too many requests from this address.</summary>
        RateLimited,
        /// <summary>503: the server is draining or could not create the room.</summary>
        Unavailable,
        /// <summary>Another HTTP status.</summary>
        Http,
        /// <summary>The request did not reach the server, or no answer came back in time.</summary>
        Network,
        /// <summary>The answer is not what the API returns.</summary>
        BadAnswer,
    }

    /// <summary>A matchmaking failure.</summary>
    public sealed class MatchmakeException : Exception
    {
        /// <summary>What went wrong.</summary>
        public readonly MatchmakeErrorKind Kind;
        /// <summary>The HTTP status, or 0.</summary>
        public readonly int Status;

        /// <summary>A failure.</summary>
        public MatchmakeException(MatchmakeErrorKind kind, int status, string message) : base(message)
        {
            Kind = kind;
            Status = status;
        }

        /// <summary>True when trying again later may succeed (what the TypeScript SDK retries).</summary>
        public bool IsRetryable
        {
            get
            {
                return Kind == MatchmakeErrorKind.Network || Kind == MatchmakeErrorKind.RateLimited || Kind == MatchmakeErrorKind.Http
                    || Kind == MatchmakeErrorKind.Unavailable || Kind == MatchmakeErrorKind.RoomFull;
            }
        }
    }

    /// <summary>An HTTP reply: status and body.</summary>
    public struct HttpReply
    {
        /// <summary>HTTP status code.</summary>
        public int Status;
        /// <summary>The body as text.</summary>
        public string Body;
    }

    /// <summary>
    /// The seam for the one HTTP call the SDK makes. The default is <see cref="HttpClientPost"/>;
    /// on WebGL, implement it with UnityWebRequest (see README.md).
    /// </summary>
    public interface IHttpPost
    {
        /// <summary>POSTs <paramref name="json"/> to <paramref name="url"/> as application/json.</summary>
        Task<HttpReply> PostJsonAsync(string url, string json, CancellationToken cancel);
    }

    /// <summary>IHttpPost over System.Net.Http.HttpClient.</summary>
    public sealed class HttpClientPost : IHttpPost
    {
        static readonly HttpClient Shared = new HttpClient();

        /// <inheritdoc/>
        public async Task<HttpReply> PostJsonAsync(string url, string json, CancellationToken cancel)
        {
            using (var content = new StringContent(json, Encoding.UTF8, "application/json"))
            using (var response = await Shared.PostAsync(url, content, cancel).ConfigureAwait(false))
            {
                string body = await response.Content.ReadAsStringAsync().ConfigureAwait(false);
                return new HttpReply { Status = (int)response.StatusCode, Body = body };
            }
        }
    }

    /// <summary>Matchmaking.</summary>
    public static class Matchmaker
    {
        /// <summary>
        /// Asks <paramref name="baseUrl"/> (http://host:port, or https:// beyond this machine) for a seat. Fails only with a
        /// <see cref="MatchmakeException"/>. The task completes on a thread-pool thread: the
        /// <see cref="TickwireClient"/> picks the result up in its Poll, on the caller's thread.
        /// </summary>
        public static async Task<MatchmakeAnswer> RequestAsync(string baseUrl, MatchmakeRequest request, IHttpPost http, TimeSpan timeout)
        {
            string url = baseUrl.TrimEnd('/') + "/api/matchmake";
            HttpReply reply;
            using (var cancel = new CancellationTokenSource(timeout))
            {
                try
                {
                    reply = await (http ?? new HttpClientPost()).PostJsonAsync(url, request.ToJson(), cancel.Token).ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    throw new MatchmakeException(MatchmakeErrorKind.Network, 0, "matchmaking request to " + url + " failed: " + e.Message);
                }
            }
            if (reply.Status != 200)
            {
                string detail = reply.Body;
                try
                {
                    var error = JsonValue.Parse(reply.Body)["error"];
                    if (error != null) detail = error.AsString();
                }
                catch (FormatException) { }
                throw new MatchmakeException(StatusKind(reply.Status), reply.Status, "matchmaking: " + reply.Status + " " + detail);
            }
            return MatchmakeAnswer.Parse(reply.Body);
        }

        static MatchmakeErrorKind StatusKind(int status)
        {
            switch (status)
            {
                case 400: return MatchmakeErrorKind.BadRequest;
                case 401: return MatchmakeErrorKind.Unauthorized;
                case 404: return MatchmakeErrorKind.NotFound;
                case 409: return MatchmakeErrorKind.RoomFull;
                case 429: return MatchmakeErrorKind.RateLimited;
                case 503: return MatchmakeErrorKind.Unavailable;
                default: return MatchmakeErrorKind.Http;
            }
        }
    }
}
