using System.Runtime.CompilerServices;

[assembly: InternalsVisibleTo("Tickwire.Tests")]
