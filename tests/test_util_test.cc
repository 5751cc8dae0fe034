// The test helpers' own checks, where a wrong helper would make other tests
// pass or fail for the wrong reason.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "test_util.h"

namespace {
namespace fs = std::filesystem;

// remove_tree removes folders, files and links, follows no link out of the
// tree, and treats a missing path as already removed.
TEST(TestUtilTest, RemoveTreeRemovesEverythingUnderItAndNothingALinkPointsTo) {
  const auto keep = nmt::test::temp_dir("remove_tree_keep");
  nmt::test::write_lines(keep + "/outside.txt", {"stays"});
  const auto root = nmt::test::temp_dir("remove_tree") + "/tree";
  fs::create_directories(root + "/a/b");
  nmt::test::write_lines(root + "/a/b/f.txt", {"x"});
  nmt::test::write_lines(root + "/g.txt", {"y"});
  fs::create_symlink(keep, root + "/a/link-to-folder");
  fs::create_symlink(keep + "/outside.txt", root + "/link-to-file");
  EXPECT_TRUE(nmt::test::remove_tree(root));
  EXPECT_FALSE(fs::exists(fs::symlink_status(root)));
  EXPECT_TRUE(fs::exists(keep + "/outside.txt"));
  EXPECT_TRUE(nmt::test::remove_tree(root));  // already gone
}

}  // namespace
