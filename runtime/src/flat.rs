//! Config sections that hold a group of fields shared with other sections (a NATS
//! connection's credentials, a guest's limits) as one typed value, while the config file
//! spells the group's keys flat beside the section's own. Owns only the [`section!`] macro;
//! the groups and sections belong to their parts. A leaf: it imports nothing of the crate.
//!
//! serde's `flatten` would do this, but it does not combine with `deny_unknown_fields` (a
//! misspelt key must be refused naming it) and loses toml's spans. So the macro declares a
//! private twin of the section with the group's fields flat, which serde reads and writes as
//! written, with every error serde and toml give for it (the key, its line, the keys the
//! section takes), and converts it to the section both ways.

/// Declares `pub struct $name` as written plus `pub $group: $gty`, and serde for it through
/// the twin `$flat`, whose fields are the section's and the group's (with the group's serde
/// attributes). Used by a part's own macro that names its group once (`nats::section!`,
/// `config::guest_section!`), not directly in sections.
///
/// Fields: doc comments first, then `#[serde(...)]` attributes (they go on the twin only).
macro_rules! section {
    (
        group $group:ident: $gty:ty {
            $( $(#[serde($($gserde:tt)*)])* $gfield:ident: $gfty:ty, )*
        }
        $(#[doc = $doc:literal])*
        #[derive($($derive:path),* $(,)?)]
        #[serde($($container:tt)*)]
        pub struct $name:ident as $flat:ident {
            $(
                $(#[doc = $fdoc:literal])*
                $(#[serde($($fserde:tt)*)])*
                pub $field:ident: $ty:ty,
            )*
        }
    ) => {
        $(#[doc = $doc])*
        #[derive($($derive),*)]
        pub struct $name {
            $(
                $(#[doc = $fdoc])*
                pub $field: $ty,
            )*
            #[doc = concat!(
                "Spelt flat in the section: ",
                $("`", stringify!($gfield), "` ",)*
                "(`_` as `-`)."
            )]
            pub $group: $gty,
        }

        #[doc = concat!("What serde reads and writes for [`", stringify!($name), "`].")]
        #[derive(serde::Serialize, serde::Deserialize)]
        #[serde($($container)*)]
        struct $flat {
            $(
                $(#[serde($($fserde)*)])*
                $field: $ty,
            )*
            $(
                $(#[serde($($gserde)*)])*
                $gfield: $gfty,
            )*
        }

        impl From<$flat> for $name {
            fn from(f: $flat) -> Self {
                // A struct expression takes a path, not a `ty` fragment: an alias is one.
                type Group = $gty;
                $name {
                    $($field: f.$field,)*
                    $group: Group {
                        $($gfield: f.$gfield,)*
                    },
                }
            }
        }

        impl From<$name> for $flat {
            fn from(s: $name) -> Self {
                let g = s.$group;
                $flat {
                    $($field: s.$field,)*
                    $($gfield: g.$gfield,)*
                }
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                <$flat as serde::Deserialize>::deserialize(d).map(Self::from)
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&$flat::from(self.clone()), s)
            }
        }
    };
}
pub(crate) use section;
