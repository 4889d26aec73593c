// A small JSON reader and writer for the matchmaking API (and the SDK's tests), so the SDK
// needs no serializer package and no reflection: .NET Standard 2.0 ships none.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Tickwire
{
    /// <summary>What a <see cref="JsonValue"/> holds.</summary>
    public enum JsonKind { Null, Bool, Number, String, Array, Object }

    /// <summary>A parsed JSON value. Numbers keep their text, so 64-bit integers stay exact.</summary>
    public sealed class JsonValue
    {
        /// <summary>Its kind.</summary>
        public JsonKind Kind;
        /// <summary>A Bool's value.</summary>
        public bool Bool;
        /// <summary>A String's value, or a Number's text.</summary>
        public string Text;
        /// <summary>An Array's items.</summary>
        public List<JsonValue> Items;
        /// <summary>An Object's members, in document order.</summary>
        public List<KeyValuePair<string, JsonValue>> Members;

        /// <summary>A member of an object, or null when absent (or not an object).</summary>
        public JsonValue this[string key]
        {
            get
            {
                if (Members == null) return null;
                foreach (var member in Members) if (member.Key == key) return member.Value;
                return null;
            }
        }

        /// <summary>An item of an array.</summary>
        public JsonValue this[int index] { get { return Items[index]; } }

        /// <summary>True for JSON null (a missing member is a C# null instead).</summary>
        public bool IsNull { get { return Kind == JsonKind.Null; } }

        /// <summary>A number (or a decimal string, as the vectors write big integers) as a double.</summary>
        public double AsDouble() { return double.Parse(Text, NumberStyles.Float, CultureInfo.InvariantCulture); }

        /// <summary>An integer number or decimal string as a long.</summary>
        public long AsLong() { return long.Parse(Text, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture); }

        /// <summary>An unsigned integer number or decimal string as a ulong.</summary>
        public ulong AsULong() { return ulong.Parse(Text, NumberStyles.None, CultureInfo.InvariantCulture); }

        /// <summary>A string's value; throws FormatException for anything else.</summary>
        public string AsString()
        {
            if (Kind != JsonKind.String) throw new FormatException("expected a JSON string, got " + Kind);
            return Text;
        }

        /// <summary>Parses a whole document; FormatException when it is not JSON.</summary>
        public static JsonValue Parse(string text)
        {
            int at = 0;
            var value = ParseValue(text, ref at);
            SkipSpace(text, ref at);
            if (at != text.Length) throw new FormatException("JSON: trailing characters at " + at);
            return value;
        }

        static void SkipSpace(string s, ref int at)
        {
            while (at < s.Length && (s[at] == ' ' || s[at] == '\n' || s[at] == '\r' || s[at] == '\t')) at++;
        }

        static JsonValue ParseValue(string s, ref int at)
        {
            SkipSpace(s, ref at);
            if (at >= s.Length) throw new FormatException("JSON: unexpected end");
            char c = s[at];
            if (c == '{')
            {
                at++;
                var obj = new JsonValue { Kind = JsonKind.Object, Members = new List<KeyValuePair<string, JsonValue>>() };
                SkipSpace(s, ref at);
                if (at < s.Length && s[at] == '}') { at++; return obj; }
                while (true)
                {
                    SkipSpace(s, ref at);
                    string key = ParseString(s, ref at);
                    SkipSpace(s, ref at);
                    Expect(s, ref at, ':');
                    obj.Members.Add(new KeyValuePair<string, JsonValue>(key, ParseValue(s, ref at)));
                    SkipSpace(s, ref at);
                    if (at < s.Length && s[at] == ',') { at++; continue; }
                    Expect(s, ref at, '}');
                    return obj;
                }
            }
            if (c == '[')
            {
                at++;
                var array = new JsonValue { Kind = JsonKind.Array, Items = new List<JsonValue>() };
                SkipSpace(s, ref at);
                if (at < s.Length && s[at] == ']') { at++; return array; }
                while (true)
                {
                    array.Items.Add(ParseValue(s, ref at));
                    SkipSpace(s, ref at);
                    if (at < s.Length && s[at] == ',') { at++; continue; }
                    Expect(s, ref at, ']');
                    return array;
                }
            }
            if (c == '"') return new JsonValue { Kind = JsonKind.String, Text = ParseString(s, ref at) };
            if (Literal(s, ref at, "true")) return new JsonValue { Kind = JsonKind.Bool, Bool = true };
            if (Literal(s, ref at, "false")) return new JsonValue { Kind = JsonKind.Bool, Bool = false };
            if (Literal(s, ref at, "null")) return new JsonValue { Kind = JsonKind.Null };
            int start = at;
            while (at < s.Length && "+-0123456789.eE".IndexOf(s[at]) >= 0) at++;
            if (at == start) throw new FormatException("JSON: unexpected '" + c + "' at " + at);
            return new JsonValue { Kind = JsonKind.Number, Text = s.Substring(start, at - start) };
        }

        static bool Literal(string s, ref int at, string word)
        {
            if (string.CompareOrdinal(s, at, word, 0, word.Length) != 0) return false;
            at += word.Length;
            return true;
        }

        static void Expect(string s, ref int at, char c)
        {
            if (at >= s.Length || s[at] != c) throw new FormatException("JSON: expected '" + c + "' at " + at);
            at++;
        }

        static string ParseString(string s, ref int at)
        {
            Expect(s, ref at, '"');
            var sb = new StringBuilder();
            while (true)
            {
                if (at >= s.Length) throw new FormatException("JSON: unterminated string");
                char c = s[at++];
                if (c == '"') return sb.ToString();
                if (c != '\\') { sb.Append(c); continue; }
                if (at >= s.Length) throw new FormatException("JSON: unterminated escape");
                char e = s[at++];
                switch (e)
                {
                    case '"': sb.Append('"'); break;
                    case '\\': sb.Append('\\'); break;
                    case '/': sb.Append('/'); break;
                    case 'b': sb.Append('\b'); break;
                    case 'f': sb.Append('\f'); break;
                    case 'n': sb.Append('\n'); break;
                    case 'r': sb.Append('\r'); break;
                    case 't': sb.Append('\t'); break;
                    case 'u':
                        if (at + 4 > s.Length) throw new FormatException("JSON: short \\u escape");
                        sb.Append((char)int.Parse(s.Substring(at, 4), NumberStyles.HexNumber, CultureInfo.InvariantCulture));
                        at += 4;
                        break;
                    default: throw new FormatException("JSON: bad escape \\" + e);
                }
            }
        }

        /// <summary>A JSON string literal of <paramref name="value"/>, quotes included.</summary>
        public static string Quote(string value)
        {
            var sb = new StringBuilder(value.Length + 2);
            sb.Append('"');
            foreach (char c in value)
            {
                switch (c)
                {
                    case '"': sb.Append("\\\""); break;
                    case '\\': sb.Append("\\\\"); break;
                    case '\n': sb.Append("\\n"); break;
                    case '\r': sb.Append("\\r"); break;
                    case '\t': sb.Append("\\t"); break;
                    default:
                        if (c < 0x20) sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                        else sb.Append(c);
                        break;
                }
            }
            return sb.Append('"').ToString();
        }
    }

    /// <summary>Hex as the vectors and the matchmaking API write it.</summary>
    public static class Hex
    {
        /// <summary>The bytes of a hex string (either case); FormatException otherwise.</summary>
        public static byte[] Decode(string hex)
        {
            if (hex.Length % 2 != 0) throw new FormatException("odd-length hex");
            var bytes = new byte[hex.Length / 2];
            for (int i = 0; i < bytes.Length; i++)
                bytes[i] = byte.Parse(hex.Substring(2 * i, 2), NumberStyles.HexNumber, CultureInfo.InvariantCulture);
            return bytes;
        }

        /// <summary>Lowercase hex of <paramref name="count"/> bytes from <paramref name="offset"/>.</summary>
        public static string Encode(byte[] bytes, int offset, int count)
        {
            var sb = new StringBuilder(count * 2);
            for (int i = 0; i < count; i++) sb.Append(bytes[offset + i].ToString("x2", CultureInfo.InvariantCulture));
            return sb.ToString();
        }

        /// <summary>Lowercase hex of all of <paramref name="bytes"/>.</summary>
        public static string Encode(byte[] bytes) { return Encode(bytes, 0, bytes.Length); }
    }
}
