from engine.cli.entry import main

raise SystemExit(main())
