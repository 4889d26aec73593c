#!/bin/sh
# Builds the SDK (bin~/Tickwire.dll) and its tests (bin~/Tickwire.Tests.exe) with Mono's mcs,
# after checking the folder is a valid Unity package (unity-package.mjs). Folders ending in
# `~` (the tests, the build, the sample) are ones Unity does not import.
# C# 7.2 is the newest language mcs knows, a subset of the 7.3 Unity compiles. mcs cannot
# compile against the netstandard.dll facade alone, so the SDK references only the assemblies
# whose APIs .NET Standard 2.0 also has (mscorlib, System, System.Core, System.Net.Http) and
# keeps to those APIs by hand (see README.md, "Compatibility"); the types it uses are checked
# against the netstandard.dll facade below.
set -eu
cd "$(dirname "$0")"
node unity-package.mjs --check
mkdir -p bin~
mcs -langversion:7.2 -target:library -warnaserror+ -debug -nowarn:1591 \
    -r:System.dll -r:System.Core.dll -r:System.Net.Http.dll \
    -doc:bin~/Tickwire.xml -out:bin~/Tickwire.dll $(find src -name '*.cs' | sort)
# Every type the SDK references must be one .NET Standard 2.0 has: one the netstandard.dll
# facade forwards. (Members are not checked: the facade has none.)
LC_ALL=C; export LC_ALL
ikdasm /usr/lib/mono/4.5/Facades/netstandard.dll | sed -n 's/^\.class extern forwarder //p' | sort -u > bin~/netstandard.types
ikdasm bin~/Tickwire.dll | grep -o '\[[A-Za-z][A-Za-z0-9._]*\][A-Za-z_][A-Za-z0-9_.`]*' | sed 's/^\[[^]]*\]//' \
    | sort -u > bin~/Tickwire.types
outside=$(comm -23 bin~/Tickwire.types bin~/netstandard.types)
if [ -n "$outside" ]; then
    echo "Tickwire.dll references types outside .NET Standard 2.0:" >&2
    echo "$outside" >&2
    exit 1
fi
mcs -langversion:7.2 -target:exe -warnaserror+ -debug \
    -r:bin~/Tickwire.dll -r:System.Net.Http.dll \
    -out:bin~/Tickwire.Tests.exe $(find 'Tests~' -name '*.cs' -not -path 'Tests~/unity-stub/*' | sort)
# The README's MonoBehaviour against a stub of UnityEngine: it must keep compiling.
mcs -langversion:7.2 -target:library -warnaserror+ -nowarn:0649,0169 \
    -r:bin~/Tickwire.dll -out:bin~/ArenaCube.dll 'Tests~/unity-stub/UnityEngine.cs' 'Samples~/ArenaCube/ArenaCube.cs'
# The tag example's generated C# mirror classes (examples/tag/csharp): generated code must compile.
mcs -langversion:7.2 -target:library -warnaserror+ \
    -r:bin~/Tickwire.dll -out:bin~/TagWorld.dll ../../examples/tag/csharp/TagWorld.cs
