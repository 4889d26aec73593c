// A real `tickwire serve` on free ports for the integration tests: the binary comes from
// $TICKWIRE_BIN (the Makefile builds it), the Rust relay peer from $TICKWIRE_RELAY_PEER.
// Without them the integration tests say "skipped" and pass.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Threading;

namespace Tickwire.Tests
{
    sealed class ServerHarness : IDisposable
    {
        readonly Process _process;
        readonly string _dir;
        public readonly Dictionary<string, string> Listening = new Dictionary<string, string>();

        public string HttpUrl { get { return "http://" + Listening["http"]; } }

        public static string Binary { get { return Environment.GetEnvironmentVariable("TICKWIRE_BIN"); } }
        public static string RelayPeer { get { return Environment.GetEnvironmentVariable("TICKWIRE_RELAY_PEER"); } }

        /// <summary>True when the binaries are there; else prints why the test is skipped.</summary>
        public static bool Available(string test)
        {
            if (!string.IsNullOrEmpty(Binary) && File.Exists(Binary) && !string.IsNullOrEmpty(RelayPeer) && File.Exists(RelayPeer)) return true;
            Console.WriteLine("        skipped " + test + ": set TICKWIRE_BIN and TICKWIRE_RELAY_PEER (make test-csharp does)");
            return false;
        }

        public ServerHarness(params string[] environment)
        {
            _dir = Path.Combine(Path.GetTempPath(), "tickwire-csharp-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(_dir);
            var start = new ProcessStartInfo(Binary,
                "serve --http 127.0.0.1:0 --udp 127.0.0.1:0 --console 127.0.0.1:0 --shards 1 --no-wt")
            {
                WorkingDirectory = _dir,
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            start.EnvironmentVariables["RUST_LOG"] = "warn";
            start.EnvironmentVariables["TICKWIRE_ADMIN__TOKEN"] = "csharp-test-admin-token";
            foreach (var pair in environment)
            {
                int eq = pair.IndexOf('=');
                start.EnvironmentVariables[pair.Substring(0, eq)] = pair.Substring(eq + 1);
            }
            _process = Process.Start(start);
            var log = new StreamWriter(Path.Combine(_dir, "server.log")) { AutoFlush = true };
            _process.ErrorDataReceived += (_, e) => { if (e.Data != null) lock (log) log.WriteLine(e.Data); };
            _process.BeginErrorReadLine();
            // Lines are read on a thread of their own, so a server that hangs silently fails the
            // wait below instead of blocking the runner.
            var lines = new System.Collections.Concurrent.BlockingCollection<string>();
            var reader = new Thread(() =>
            {
                try
                {
                    string line;
                    while ((line = _process.StandardOutput.ReadLine()) != null) lines.Add(line);
                }
                catch (Exception) { }
                lines.CompleteAdding();
            }) { IsBackground = true };
            reader.Start();
            var deadline = DateTime.UtcNow.AddSeconds(30);
            while (true)
            {
                string line;
                var left = deadline - DateTime.UtcNow;
                if (left <= TimeSpan.Zero || !lines.TryTake(out line, left))
                {
                    if (lines.IsAddingCompleted)
                        throw new AssertionException("tickwire serve exited with " + (_process.WaitForExit(1000) ? _process.ExitCode.ToString() : "?") + "; see " + _dir + "/server.log");
                    Dispose();
                    throw new AssertionException("tickwire serve did not say where it listens within 30 s; see " + _dir + "/server.log");
                }
                if (!line.StartsWith("listening http=", StringComparison.Ordinal)) continue;
                foreach (var part in line.Substring("listening ".Length).Split(' '))
                {
                    int eq = part.IndexOf('=');
                    if (eq > 0) Listening[part.Substring(0, eq)] = part.Substring(eq + 1);
                }
                return;
            }
        }

        public void Dispose()
        {
            try
            {
                if (!_process.HasExited)
                {
                    // SIGTERM: the server drains and exits by itself.
                    Process.Start("kill", "-TERM " + _process.Id).WaitForExit();
                    if (!_process.WaitForExit(5000)) _process.Kill();
                }
            }
            catch (InvalidOperationException) { }
            // A server that shut down cleanly leaves nothing worth reading; keep the rest.
            try
            {
                if (_process.HasExited && _process.ExitCode == 0) Directory.Delete(_dir, true);
            }
            catch (Exception) { }
        }

        /// <summary>Runs the Rust relay peer; its output lines arrive on a background thread.</summary>
        public static Process StartPeer(string server, string transport, ulong room, List<string> output)
        {
            var start = new ProcessStartInfo(RelayPeer, server + " " + transport + " " + room)
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            var process = Process.Start(start);
            process.OutputDataReceived += (_, e) => { if (e.Data != null) lock (output) output.Add(e.Data); };
            process.ErrorDataReceived += (_, e) => { if (e.Data != null) lock (output) output.Add("stderr: " + e.Data); };
            process.BeginOutputReadLine();
            process.BeginErrorReadLine();
            return process;
        }
    }

    static class Drive
    {
        /// <summary>Polls until <paramref name="done"/> or the deadline; events go to <paramref name="onEvent"/>.</summary>
        public static void Until(TickwireClient client, TimeSpan limit, string what, Func<bool> done, Action<ClientEvent> onEvent)
        {
            var deadline = DateTime.UtcNow + limit;
            while (!done())
            {
                if (DateTime.UtcNow > deadline) throw new AssertionException("timed out after " + limit.TotalSeconds + " s waiting for " + what + " (client " + client.State + ")");
                client.Poll();
                ClientEvent e;
                while (client.TryGetEvent(out e)) onEvent(e);
                Thread.Sleep(2);
            }
        }
    }
}
