// The SDK's console test runner: every public static method marked [Test] in this assembly,
// in a fixed order, each reported as ok or FAILED with its message. Exit code 1 on a failure.
// `mono Tickwire.Tests.exe [name-filter]`.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Reflection;

namespace Tickwire.Tests
{
    [AttributeUsage(AttributeTargets.Method)]
    sealed class TestAttribute : Attribute { }

    sealed class AssertionException : Exception
    {
        public AssertionException(string message) : base(message) { }
    }

    static class Assert
    {
        public static void True(bool condition, string message)
        {
            if (!condition) throw new AssertionException(message);
        }

        public static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertionException(what + ": expected " + expected + ", got " + actual);
        }

        public static TException Throws<TException>(Action action, string what) where TException : Exception
        {
            try { action(); }
            catch (TException e) { return e; }
            catch (Exception e) { throw new AssertionException(what + ": expected " + typeof(TException).Name + ", got " + e.GetType().Name + ": " + e.Message); }
            throw new AssertionException(what + ": expected " + typeof(TException).Name + ", nothing was thrown");
        }
    }

    static class Repo
    {
        /// <summary>The repository root: $TICKWIRE_REPO, else the first parent holding Cargo.toml.</summary>
        public static string Root
        {
            get
            {
                var env = Environment.GetEnvironmentVariable("TICKWIRE_REPO");
                if (!string.IsNullOrEmpty(env)) return env;
                var dir = new DirectoryInfo(Directory.GetCurrentDirectory());
                while (dir != null && !File.Exists(Path.Combine(dir.FullName, "Cargo.toml"))) dir = dir.Parent;
                if (dir == null) throw new InvalidOperationException("set TICKWIRE_REPO to the repository root");
                return dir.FullName;
            }
        }

        public static JsonValue Json(params string[] path)
        {
            return JsonValue.Parse(File.ReadAllText(Path.Combine(Root, Path.Combine(path))));
        }
    }

    static class Program
    {
        static int Main(string[] args)
        {
            string filter = args.Length > 0 ? args[0] : null;
            var tests = typeof(Program).Assembly.GetTypes()
                .SelectMany(t => t.GetMethods(BindingFlags.Public | BindingFlags.NonPublic | BindingFlags.Static))
                .Where(m => m.GetCustomAttributes(typeof(TestAttribute), false).Length > 0)
                .OrderBy(m => m.DeclaringType.Name, StringComparer.Ordinal)
                .ThenBy(m => m.MetadataToken)
                .ToList();
            int passed = 0, failed = 0;
            var total = Stopwatch.StartNew();
            foreach (var test in tests)
            {
                string name = test.DeclaringType.Name + "." + test.Name;
                if (filter != null && name.IndexOf(filter, StringComparison.OrdinalIgnoreCase) < 0) continue;
                var watch = Stopwatch.StartNew();
                try
                {
                    test.Invoke(null, null);
                    passed++;
                    Console.WriteLine("ok      " + name + " (" + watch.ElapsedMilliseconds + " ms)");
                }
                catch (TargetInvocationException e)
                {
                    failed++;
                    var inner = e.InnerException;
                    Console.WriteLine("FAILED  " + name + ": " + inner.GetType().Name + ": " + inner.Message);
                    if (!(inner is AssertionException)) Console.WriteLine(inner.StackTrace);
                }
            }
            Console.WriteLine("csharp tests: " + passed + " passed, " + failed + " failed (" + total.ElapsedMilliseconds + " ms)");
            return failed == 0 ? 0 : 1;
        }
    }
}
